package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrPlainHTTPUnsafe means a registry request would have gone over plain HTTP to a host that is
// not loopback. go-containerregistry picks plain HTTP on its own for RFC 1918 addresses and
// "*.local" names; Push refuses that.
var ErrPlainHTTPUnsafe = errors.New("imagebuild: plain HTTP is allowed only for loopback registries")

// emptyConfig is the OCI 1.1 empty descriptor's content, the config of the SBOM artifact.
var emptyConfig = []byte("{}")

// Pushed names what Push wrote.
type Pushed struct {
	// Ref is REPO@DIGEST of the image index.
	Ref string
	// Digest is the image index digest.
	Digest v1.Hash
	// SBOMDigest is the digest of the SBOM referrer manifest (subject: the index).
	SBOMDigest v1.Hash
}

// IsLoopbackHost reports whether host (with or without a port) is "localhost" or a loopback IP.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// httpsOnly refuses plain-HTTP requests to hosts that are not loopback.
type httpsOnly struct{ next http.RoundTripper }

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !IsLoopbackHost(req.URL.Host) {
		return nil, fmt.Errorf("%w: %s", ErrPlainHTTPUnsafe, req.URL.Host)
	}
	return t.next.RoundTrip(req)
}

// Push writes b's index to repo (tagged tag when non-empty) and the SBOM as a referrer of the
// index, and returns the digests. Credentials come from the Docker config keychain.
func Push(ctx context.Context, b *Built, repo, tag string) (*Pushed, error) {
	var nameOpts []name.Option
	host, _, _ := strings.Cut(repo, "/")
	if IsLoopbackHost(host) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	r, err := name.NewRepository(repo, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: repository %q: %w", repo, err)
	}
	dig, err := b.Index.Digest()
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithTransport(httpsOnly{next: remote.DefaultTransport}),
	}
	var ref name.Reference = r.Digest(dig.String())
	if tag != "" {
		ref = r.Tag(tag)
	}
	if err := remote.WriteIndex(ref, b.Index, opts...); err != nil {
		return nil, fmt.Errorf("imagebuild: push index: %w", err)
	}
	sbomDigest, err := pushSBOM(b, r, opts)
	if err != nil {
		return nil, err
	}
	return &Pushed{Ref: r.Digest(dig.String()).String(), Digest: dig, SBOMDigest: sbomDigest}, nil
}

// rawManifest is a remote.Taggable for a manifest written by hand.
type rawManifest struct {
	body []byte
	mt   types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error) { return m.body, nil }

func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// SBOMManifest returns the OCI 1.1 artifact manifest of the SBOM: artifactType SBOMMediaType, the
// empty config, one layer (the SBOM) and subject = the index.
func SBOMManifest(b *Built) ([]byte, error) {
	idxDigest, err := b.Index.Digest()
	if err != nil {
		return nil, err
	}
	idxSize, err := b.Index.Size()
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMMediaType,
		Config:        descriptorOf(emptyConfig, "application/vnd.oci.empty.v1+json"),
		Layers:        []v1.Descriptor{descriptorOf(b.SBOM, SBOMMediaType)},
		Subject:       &v1.Descriptor{MediaType: types.OCIImageIndex, Digest: idxDigest, Size: idxSize},
		Annotations:   map[string]string{"org.opencontainers.image.created": b.SourceDate.UTC().Format(time.RFC3339)},
	}
	return json.Marshal(m)
}

func descriptorOf(content []byte, mt types.MediaType) v1.Descriptor {
	h, n, _ := v1.SHA256(bytes.NewReader(content))
	return v1.Descriptor{MediaType: mt, Digest: h, Size: n}
}

func pushSBOM(b *Built, r name.Repository, opts []remote.Option) (v1.Hash, error) {
	for _, blob := range []struct {
		data []byte
		mt   types.MediaType
	}{{emptyConfig, "application/vnd.oci.empty.v1+json"}, {b.SBOM, SBOMMediaType}} {
		if err := remote.WriteLayer(r, static.NewLayer(blob.data, blob.mt), opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("imagebuild: push SBOM blob: %w", err)
		}
	}
	body, err := SBOMManifest(b)
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, _ := v1.SHA256(bytes.NewReader(body))
	if err := remote.Put(r.Digest(h.String()), rawManifest{body: body, mt: types.OCIManifestSchema1}, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("imagebuild: push SBOM manifest: %w", err)
	}
	return h, nil
}
