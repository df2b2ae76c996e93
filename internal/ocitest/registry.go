// Package ocitest runs an in-process OCI registry on loopback for tests of profile packs: the
// go-containerregistry registry (pkg/registry) wrapped with a correct OCI 1.1 referrers API, or
// with no referrers API at all so that clients take the referrers tag-schema fallback.
//
// go-containerregistry's own referrers answer reports the config media type instead of the
// manifest's artifactType, ignores the artifactType filter and sends no OCI-Subject header, so this
// package answers referrers itself, from the manifests pushed with a subject.
package ocitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Options configure a Registry.
type Options struct {
	// Referrers serves the OCI 1.1 referrers API. When false, GET /v2/<name>/referrers/<digest>
	// answers 404 and manifest pushes carry no OCI-Subject header, as on registries without the
	// API (clients then use the sha256-<hex> tag schema).
	Referrers bool
	// Username and Password, when set, require HTTP Basic authentication on every request
	// (401 with a Basic challenge otherwise).
	Username, Password string
	// TLS serves HTTPS with a certificate of its own (private) CA; see [Registry.CertPool].
	TLS bool
	// Certificate, when set, serves HTTPS with this certificate instead (a CA of the test's).
	Certificate *tls.Certificate
	// Addr is the address to listen on (default 127.0.0.1:0), e.g. an address of a network the
	// test made, where Pods of a test node reach the registry.
	Addr string
}

// Registry is an in-process OCI registry listening on a loopback address (or Options.Addr).
type Registry struct {
	// Host is "127.0.0.1:PORT" (or Options.Addr's host and port), the registry part of references
	// to this registry.
	Host string

	server   *httptest.Server
	inner    http.Handler
	opts     Options
	requests atomic.Int64

	mu        sync.Mutex
	referrers map[string][]descriptor // "repo@subjectDigest" -> referrer descriptors
	tampered  map[string][]byte       // digest -> bytes served instead
}

type descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// New starts a registry; Close stops it.
func New(opts Options) *Registry {
	r := &Registry{
		inner:     registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		opts:      opts,
		referrers: map[string][]descriptor{},
		tampered:  map[string][]byte{},
	}
	r.server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if opts.Addr != "" {
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", opts.Addr)
		if err != nil {
			panic(fmt.Sprintf("ocitest: listen on %s: %v", opts.Addr, err))
		}
		_ = r.server.Listener.Close()
		r.server.Listener = ln
	}
	switch {
	case opts.Certificate != nil:
		r.server.TLS = &tls.Config{Certificates: []tls.Certificate{*opts.Certificate}, MinVersion: tls.VersionTLS12}
		r.server.StartTLS()
	case opts.TLS:
		r.server.StartTLS()
	default:
		r.server.Start()
	}
	r.Host = strings.TrimPrefix(strings.TrimPrefix(r.server.URL, "http://"), "https://")
	return r
}

// CertPool returns a pool holding the certificate of a TLS registry (nil for plain HTTP or
// Options.Certificate: the test holds that certificate's CA).
func (r *Registry) CertPool() *x509.CertPool {
	if r.opts.Certificate != nil || r.server.Certificate() == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(r.server.Certificate())
	return pool
}

// Close stops the registry.
func (r *Registry) Close() { r.server.Close() }

// Requests returns the number of HTTP requests served so far.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// Tamper makes the registry serve content instead of the stored bytes for digest (a blob or a
// manifest), as a compromised registry or mirror would.
func (r *Registry) Tamper(digest string, content []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tampered[digest] = bytes.Clone(content)
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.opts.Username != "" {
		u, p, ok := req.BasicAuth()
		if !ok || u != r.opts.Username || p != r.opts.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="ocitest"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
	}
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/v2/"), "/")
	n := len(parts)
	if n >= 3 && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		r.mu.Lock()
		t, ok := r.tampered[parts[n-1]]
		r.mu.Unlock()
		if ok && (parts[n-2] == "blobs" || parts[n-2] == "manifests") {
			if parts[n-2] == "manifests" {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			}
			w.Header().Set("Docker-Content-Digest", parts[n-1])
			w.Header().Set("Content-Length", strconv.Itoa(len(t)))
			if req.Method == http.MethodGet {
				_, _ = w.Write(t)
			}
			return
		}
	}
	if n >= 3 && parts[n-2] == "referrers" {
		r.serveReferrers(w, req, strings.Join(parts[:n-2], "/"), parts[n-1])
		return
	}
	if n >= 3 && parts[n-2] == "manifests" && req.Method == http.MethodPut {
		r.putManifest(w, req, strings.Join(parts[:n-2], "/"))
		return
	}
	r.inner.ServeHTTP(w, req)
}

func (r *Registry) putManifest(w http.ResponseWriter, req *http.Request, repo string) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	r.inner.ServeHTTP(rec, req)
	var m struct {
		MediaType    string            `json:"mediaType"`
		ArtifactType string            `json:"artifactType"`
		Config       descriptor        `json:"config"`
		Subject      *descriptor       `json:"subject"`
		Annotations  map[string]string `json:"annotations"`
	}
	if rec.Code == http.StatusCreated && json.Unmarshal(body, &m) == nil && m.Subject != nil && r.opts.Referrers {
		sum := sha256.Sum256(body)
		d := descriptor{
			MediaType:    req.Header.Get("Content-Type"),
			Digest:       "sha256:" + hex.EncodeToString(sum[:]),
			Size:         int64(len(body)),
			ArtifactType: m.ArtifactType,
			Annotations:  m.Annotations,
		}
		if d.ArtifactType == "" {
			d.ArtifactType = m.Config.MediaType
		}
		key := repo + "@" + m.Subject.Digest
		r.mu.Lock()
		dup := false
		for _, e := range r.referrers[key] {
			dup = dup || e.Digest == d.Digest
		}
		if !dup {
			r.referrers[key] = append(r.referrers[key], d)
		}
		r.mu.Unlock()
		rec.Header().Set("OCI-Subject", m.Subject.Digest)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (r *Registry) serveReferrers(w http.ResponseWriter, req *http.Request, repo, subject string) {
	if !r.opts.Referrers {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"errors":[{"code":"NOT_FOUND","message":"referrers API not supported"}]}`)
		return
	}
	if !strings.HasPrefix(subject, "sha256:") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"errors":[{"code":"DIGEST_INVALID","message":"digest required"}]}`)
		return
	}
	want := req.URL.Query().Get("artifactType")
	r.mu.Lock()
	list := []descriptor{}
	for _, d := range r.referrers[repo+"@"+subject] {
		if want == "" || d.ArtifactType == want {
			list = append(list, d)
		}
	}
	r.mu.Unlock()
	body, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     list,
	})
	w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
	if want != "" {
		w.Header().Set("OCI-Filters-Applied", "artifactType")
	}
	_, _ = w.Write(body)
}
