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

// put uploads a manifest (blobs are not needed by the registry) and returns the response.
func put(t *testing.T, r *Registry, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://"+r.Host+"/v2/team/a/manifests/sha256:"+sha(body), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func get(t *testing.T, r *Registry, path string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+r.Host+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp, buf.Bytes()
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
	if resp := put(t, r, referrer("application/vnd.dev.sigstore.bundle.v0.3+json")); resp.Header.Get("OCI-Subject") != subject {
		t.Fatalf("push of a manifest with a subject must answer OCI-Subject, got %q", resp.Header.Get("OCI-Subject"))
	}
	put(t, r, referrer("application/example.sbom"))
	resp, body := get(t, r, "/v2/team/a/referrers/"+subject+"?artifactType=application/vnd.dev.sigstore.bundle.v0.3%2Bjson")
	var idx struct {
		Manifests []struct {
			ArtifactType string `json:"artifactType"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(body, &idx); err != nil || resp.Header.Get("Content-Type") != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("%v %s", err, body)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].ArtifactType != "application/vnd.dev.sigstore.bundle.v0.3+json" ||
		resp.Header.Get("OCI-Filters-Applied") != "artifactType" {
		t.Fatalf("filtered referrers: %s", body)
	}
	if _, body := get(t, r, "/v2/team/a/referrers/"+subject); !strings.Contains(string(body), "application/example.sbom") {
		t.Fatalf("unfiltered referrers: %s", body)
	}
}

func TestReferrersOff(t *testing.T) {
	r := New(Options{Referrers: false})
	defer r.Close()
	if resp := put(t, r, referrer("application/vnd.dev.sigstore.bundle.v0.3+json")); resp.Header.Get("OCI-Subject") != "" || resp.StatusCode != http.StatusCreated {
		t.Fatalf("without the API: status %d, OCI-Subject %q", resp.StatusCode, resp.Header.Get("OCI-Subject"))
	}
	if resp, _ := get(t, r, "/v2/team/a/referrers/"+subject); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("referrers API must be absent, got %d", resp.StatusCode)
	}
}

func TestBasicAuthAndTamper(t *testing.T) {
	r := New(Options{Username: "u", Password: "p"})
	defer r.Close()
	if resp, _ := get(t, r, "/v2/"); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("want a Basic challenge, got %d", resp.StatusCode)
	}
	open := New(Options{})
	defer open.Close()
	open.Tamper(subject, []byte("evil"))
	if resp, body := get(t, open, "/v2/team/a/blobs/"+subject); resp.StatusCode != http.StatusOK || string(body) != "evil" {
		t.Fatalf("tampered blob: %d %q", resp.StatusCode, body)
	}
}
