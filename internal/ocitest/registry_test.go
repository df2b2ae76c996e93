package ocitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// answer is the part of an HTTP response the tests look at (the body is read and closed).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// put uploads a manifest (blobs are not needed by the registry).
func put(t *testing.T, r *Registry, body string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://"+r.Host+"/v2/team/a/manifests/sha256:"+sha(body), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return answer{resp.StatusCode, resp.Header, buf.Bytes()}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func get(t *testing.T, r *Registry, path string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+r.Host+path, nil)
	return do(t, req)
}

const subject = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func referrer(artifactType string) string {
	return `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"` + artifactType +
		`","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},` +
		`"layers":[],"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + subject + `","size":10}}`
}

func TestReferrersAPI(t *testing.T) {
	r := New(Options{Referrers: true})
	defer r.Close()
	if a := put(t, r, referrer("application/vnd.dev.sigstore.bundle.v0.3+json")); a.header.Get("OCI-Subject") != subject {
		t.Fatalf("push of a manifest with a subject must answer OCI-Subject, got %q", a.header.Get("OCI-Subject"))
	}
	put(t, r, referrer("application/example.sbom"))
	a := get(t, r, "/v2/team/a/referrers/"+subject+"?artifactType=application/vnd.dev.sigstore.bundle.v0.3%2Bjson")
	body := a.body
	var idx struct {
		Manifests []struct {
			ArtifactType string `json:"artifactType"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(body, &idx); err != nil || a.header.Get("Content-Type") != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("%v %s", err, body)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].ArtifactType != "application/vnd.dev.sigstore.bundle.v0.3+json" ||
		a.header.Get("OCI-Filters-Applied") != "artifactType" {
		t.Fatalf("filtered referrers: %s", body)
	}
	if a := get(t, r, "/v2/team/a/referrers/"+subject); !strings.Contains(string(a.body), "application/example.sbom") {
		t.Fatalf("unfiltered referrers: %s", a.body)
	}
}

func TestReferrersOff(t *testing.T) {
	r := New(Options{Referrers: false})
	defer r.Close()
	if a := put(t, r, referrer("application/vnd.dev.sigstore.bundle.v0.3+json")); a.header.Get("OCI-Subject") != "" || a.status != http.StatusCreated {
		t.Fatalf("without the API: status %d, OCI-Subject %q", a.status, a.header.Get("OCI-Subject"))
	}
	if a := get(t, r, "/v2/team/a/referrers/"+subject); a.status != http.StatusNotFound {
		t.Fatalf("referrers API must be absent, got %d", a.status)
	}
}

func TestBasicAuthAndTamper(t *testing.T) {
	r := New(Options{Username: "u", Password: "p"})
	defer r.Close()
	if a := get(t, r, "/v2/"); a.status != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("want a Basic challenge, got %d", a.status)
	}
	open := New(Options{})
	defer open.Close()
	open.Tamper(subject, []byte("evil"))
	if a := get(t, open, "/v2/team/a/blobs/"+subject); a.status != http.StatusOK || string(a.body) != "evil" {
		t.Fatalf("tampered blob: %d %q", a.status, a.body)
	}
}
