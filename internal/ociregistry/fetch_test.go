package ociregistry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// Content that does not match its descriptor, by size as well as by bytes, is the refusal
// blob_digest_mismatch (operator: PackInvalid, Stalled), never a RegistryError (RegistryUnavailable,
// retried). A registry that is down, answers 500 or breaks a transfer off stays a RegistryError.

func wantContentRefusal(t *testing.T, err error) {
	t.Helper()
	wantRefusal(t, err, "blob_digest_mismatch", ocipack.ErrBlobDigestMismatch)
	var re *RegistryError
	if errors.As(err, &re) {
		t.Fatalf("content mismatch reported as a registry error: %v", err)
	}
}

func wantRegistryError(t *testing.T, err error) {
	t.Helper()
	var re *RegistryError
	if !errors.As(err, &re) || isRefusal(err) {
		t.Fatalf("got %v, want a RegistryError", err)
	}
}

// front serves reg through a reverse proxy; handle answers a request itself when it returns true.
func front(t *testing.T, reg *ocitest.Registry, handle func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handle == nil || !handle(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pulledPack pushes a one-profile pack and returns its reference, client, manifest and first layer.
func pulledPack(t *testing.T, reg *ocitest.Registry) (Reference, *Client, *Pack, string) {
	t.Helper()
	ref, c := pushed(t, reg, 1)
	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(p.Manifest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return ref, c, p, m.Layers[0].Digest.String()
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestPullSizeTamperRefused(t *testing.T) {
	ctx := context.Background()
	grow := func(b []byte) []byte { return append(bytes.Clone(b), ' ') }
	t.Run("layer grown", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c, p, layer := pulledPack(t, reg)
		reg.Tamper(layer, grow(p.Layers[0]))
		_, err := c.Pull(ctx, ref)
		wantContentRefusal(t, err)
	})
	t.Run("layer shrunk", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c, p, layer := pulledPack(t, reg)
		reg.Tamper(layer, p.Layers[0][:len(p.Layers[0])-1])
		_, err := c.Pull(ctx, ref)
		wantContentRefusal(t, err)
	})
	t.Run("layer emptied", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c, _, layer := pulledPack(t, reg)
		reg.Tamper(layer, nil)
		_, err := c.Pull(ctx, ref)
		wantContentRefusal(t, err)
	})
	t.Run("manifest grown", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c, p, _ := pulledPack(t, reg)
		reg.Tamper(ref.Digest, grow(p.Manifest))
		_, err := c.Pull(ctx, ref)
		wantContentRefusal(t, err)
	})
	t.Run("manifest shrunk", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c, p, _ := pulledPack(t, reg)
		reg.Tamper(ref.Digest, p.Manifest[:len(p.Manifest)-1])
		_, err := c.Pull(ctx, ref)
		wantContentRefusal(t, err)
	})

	// Through a front that answers HEAD honestly but serves other content on GET, with or without a
	// Content-Length, or with the Docker-Content-Digest of the content it really serves.
	serve := func(body []byte, contentType string, length bool, digestHeader string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			if contentType != "" {
				w.Header().Set("Content-Type", contentType)
			}
			if digestHeader != "" {
				w.Header().Set("Docker-Content-Digest", digestHeader)
			}
			if length {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
				return
			}
			half := len(body) / 2 // flush before the end: chunked, no Content-Length
			_, _ = w.Write(body[:half])
			w.(http.Flusher).Flush()
			_, _ = w.Write(body[half:])
		}
	}
	for _, tc := range []struct {
		name     string
		manifest bool
		mutate   func([]byte) []byte
		length   bool
		header   string // "want": the requested digest, "real": the served content's digest
	}{
		{"manifest grown on GET only", true, grow, true, "want"},
		{"manifest grown on GET only, real digest header", true, grow, true, "real"},
		{"manifest grown, chunked", true, grow, false, ""},
		{"layer grown, chunked", false, grow, false, ""},
		{"layer shrunk, chunked", false, func(b []byte) []byte { return b[:len(b)-1] }, false, ""},
		{"layer same size, real digest header", false, func(b []byte) []byte { return bytes.ToUpper(b) }, true, "real"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: true})
			defer reg.Close()
			ref, c, p, layer := pulledPack(t, reg)
			target, orig, ct := layer, p.Layers[0], ""
			if tc.manifest {
				target, orig, ct = ref.Digest, p.Manifest, "application/vnd.oci.image.manifest.v1+json"
			}
			body := tc.mutate(orig)
			hdr := map[string]string{"want": target, "real": sha(body)}[tc.header]
			host := front(t, reg, func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/"+target) {
					return false
				}
				serve(body, ct, tc.length, hdr)(w)
				return true
			})
			fr := ref
			fr.Registry = host
			_, err := c.Pull(ctx, fr)
			wantContentRefusal(t, err)
		})
	}
}

// Registries commonly redirect blob GETs to storage: the answer of the redirect target is checked
// against the descriptor too, and an honest one still pulls.
func TestPullRedirectedLayer(t *testing.T) {
	for _, tc := range []struct {
		name string
		grow bool
	}{{"honest", false}, {"grown", true}} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: true})
			defer reg.Close()
			ref, c, p, layer := pulledPack(t, reg)
			body := p.Layers[0]
			if tc.grow {
				body = append(bytes.Clone(body), ' ')
			}
			ref.Registry = front(t, reg, func(w http.ResponseWriter, r *http.Request) bool {
				switch {
				case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+layer):
					http.Redirect(w, r, "/storage/object-1", http.StatusTemporaryRedirect)
					return true
				case r.URL.Path == "/storage/object-1":
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
					_, _ = w.Write(body)
					return true
				}
				return false
			})
			got, err := c.Pull(context.Background(), ref)
			if !tc.grow {
				if err != nil || !bytes.Equal(got.Layers[0], p.Layers[0]) {
					t.Fatalf("redirected pull: %v", err)
				}
				return
			}
			wantContentRefusal(t, err)
		})
	}
}

func TestPullManifestHeadWithOtherDigestRefused(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c, p, _ := pulledPack(t, reg)
	other := append(bytes.Clone(p.Manifest), ' ')
	ref.Registry = front(t, reg, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodHead || !strings.HasSuffix(r.URL.Path, "/manifests/"+ref.Digest) {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Docker-Content-Digest", sha(other))
		w.Header().Set("Content-Length", strconv.Itoa(len(other)))
		return true
	})
	_, err := c.Pull(context.Background(), ref)
	wantContentRefusal(t, err)
}

func TestBundleSizeTamperIsNoEvidence(t *testing.T) {
	ctx := context.Background()
	for _, part := range []string{"bundle layer", "referrer manifest"} {
		for _, delta := range []int{+1, -1} {
			t.Run(fmt.Sprintf("%s %+d byte", part, delta), func(t *testing.T) {
				reg := ocitest.New(ocitest.Options{Referrers: true})
				defer reg.Close()
				ref, c := pushed(t, reg, 1)
				signer, pub := keySigner(t)
				if _, err := signer.Sign(ctx, c, ref, testProvenance()); err != nil {
					t.Fatal(err)
				}
				policy := Policy{PublicKey: pub, Provenance: provenancePolicy()}
				if _, err := NewVerifier(c, nil).Verify(ctx, ref, policy); err != nil {
					t.Fatalf("untampered pack must verify: %v", err)
				}
				refs, err := c.Bundles(ctx, ref)
				if err != nil || len(refs) != 2 {
					t.Fatalf("bundles: %d %v", len(refs), err)
				}
				for _, r := range refs {
					digest, b := sha(r.Bundle), r.Bundle
					if part == "referrer manifest" {
						digest = r.Descriptor.Digest.String()
						if b, err = fetchBlobFor(ctx, c, ref, r); err != nil {
							t.Fatal(err)
						}
					}
					if delta > 0 {
						b = append(bytes.Clone(b), '\n')
					} else {
						b = b[:len(b)-1]
					}
					reg.Tamper(digest, b)
				}
				got, err := c.Bundles(ctx, ref)
				if err != nil || len(got) != 0 {
					t.Fatalf("tampered bundles must be skipped, not fail the listing: %d %v", len(got), err)
				}
				_, err = NewVerifier(c, nil).Verify(ctx, ref, policy)
				wantRefusal(t, err, "missing_signature", ocipack.ErrNoSignature)
				var re *RegistryError
				if errors.As(err, &re) {
					t.Fatalf("tampered bundles reported as a registry error: %v", err)
				}
			})
		}
	}
}

// fetchBlobFor fetches the raw referrer manifest of r.
func fetchBlobFor(ctx context.Context, c *Client, ref Reference, r Referrer) ([]byte, error) {
	repo, err := c.repository(ref)
	if err != nil {
		return nil, err
	}
	return fetchBlob(ctx, repo, r.Descriptor)
}

func TestPullRegistryFailuresStayRegistryErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("registry down", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		ref, c := pushed(t, reg, 1)
		reg.Close()
		_, err := c.Pull(ctx, ref)
		wantRegistryError(t, err)
	})
	t.Run("500 everywhere", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c := pushed(t, reg, 1)
		ref.Registry = front(t, reg, func(w http.ResponseWriter, _ *http.Request) bool {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		})
		_, err := c.Pull(ctx, ref)
		wantRegistryError(t, err)
		if !strings.Contains(err.Error(), "HTTP 500") {
			t.Fatalf("message %q", err)
		}
	})
	// Failures of the layer GET itself, after the manifest was read.
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, body []byte, digest string)
	}{
		{"layer 500", func(w http.ResponseWriter, _ []byte, _ string) { w.WriteHeader(http.StatusInternalServerError) }},
		{"layer 503 with a body of the right length", func(w http.ResponseWriter, body []byte, _ string) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(body)
		}},
		{"transfer broken off (Content-Length)", func(w http.ResponseWriter, body []byte, digest string) {
			breakOff(w, fmt.Sprintf("Content-Length: %d\r\nDocker-Content-Digest: %s\r\n\r\n%s", len(body), digest, body[:len(body)/2]))
		}},
		{"transfer broken off (chunked)", func(w http.ResponseWriter, body []byte, _ string) {
			breakOff(w, fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body)/2, body[:len(body)/2]))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: true})
			defer reg.Close()
			ref, c, p, layer := pulledPack(t, reg)
			ref.Registry = front(t, reg, func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+layer) {
					return false
				}
				tc.handle(w, p.Layers[0], layer)
				return true
			})
			_, err := c.Pull(ctx, ref)
			wantRegistryError(t, err)
		})
	}
}

// breakOff writes a 200 status line, then rest (headers and part of a body), and closes the
// connection.
func breakOff(w http.ResponseWriter, rest string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\n" + rest)
	_ = buf.Flush()
}
