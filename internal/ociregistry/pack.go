package ociregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry"
	k8sjson "sigs.k8s.io/json"

	"github.com/b10x/connector-mcp/snapshot"
)

// Limits bound everything read from a registry. The zero value of a field means its default.
type Limits struct {
	// MaxManifestBytes bounds a pack or referrer manifest (default 64 KiB).
	MaxManifestBytes int64
	// MaxLayers bounds the number of profile layers in a pack (default 16).
	MaxLayers int
	// MaxLayerBytes bounds one profile layer (default MaxProfileSize, 4 MiB).
	MaxLayerBytes int64
	// MaxTotalBytes bounds all layers of a pack together (default 16 MiB).
	MaxTotalBytes int64
	// MaxBundleBytes bounds one sigstore bundle (default 1 MiB).
	MaxBundleBytes int64
	// MaxReferrers bounds the bundle referrers examined for one pack (default 32).
	MaxReferrers int
}

// DefaultLimits returns the default bounds.
func DefaultLimits() Limits {
	return Limits{
		MaxManifestBytes: 64 << 10,
		MaxLayers:        16,
		MaxLayerBytes:    ocipack.MaxProfileSize,
		MaxTotalBytes:    16 << 20,
		MaxBundleBytes:   1 << 20,
		MaxReferrers:     32,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxManifestBytes <= 0 {
		l.MaxManifestBytes = d.MaxManifestBytes
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = d.MaxLayers
	}
	if l.MaxLayerBytes <= 0 {
		l.MaxLayerBytes = d.MaxLayerBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxBundleBytes <= 0 {
		l.MaxBundleBytes = d.MaxBundleBytes
	}
	if l.MaxReferrers <= 0 {
		l.MaxReferrers = d.MaxReferrers
	}
	return l
}

// Reference names a pack (or a repository, when Digest is empty) in a registry.
type Reference struct {
	// Registry is the registry host, with port when not the default, e.g. "127.0.0.1:5000".
	Registry string
	// Repository is the repository path, e.g. "team/github".
	Repository string
	// Digest is "sha256:<hex>"; empty for a bare repository.
	Digest string
}

// String returns "REGISTRY/REPOSITORY@DIGEST" (or without "@DIGEST" for a bare repository).
func (r Reference) String() string {
	s := r.Registry + "/" + r.Repository
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// ParseDigestReference parses "REGISTRY/REPOSITORY@sha256:<hex>". A tag, or no digest at all, is
// refused as "digest_required": a tag is never trusted. Any other malformation is refused as
// "invalid_reference".
func ParseDigestReference(s string) (Reference, error) {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		if _, err := registry.ParseReference(s); err != nil {
			return Reference{}, refuse(ocipack.RefusalInvalidReference, "", ocipack.ErrInvalidReference)
		}
		return Reference{}, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	name := s[:at]
	if slash := strings.LastIndex(name, "/"); slash >= 0 && strings.Contains(name[slash+1:], ":") {
		// "repo:tag@digest" is refused, so that no reader is misled by a tag that is not what
		// is pulled.
		return Reference{}, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	ref, err := registry.ParseReference(s)
	if err != nil || ref.ValidateReferenceAsDigest() != nil {
		return Reference{}, refuse(ocipack.RefusalInvalidReference, "", ocipack.ErrInvalidReference)
	}
	d := digest.Digest(ref.Reference)
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
		return Reference{}, refuse(ocipack.RefusalInvalidReference, "", ocipack.ErrInvalidReference)
	}
	return Reference{Registry: ref.Registry, Repository: ref.Repository, Digest: d.String()}, nil
}

// ParseRepository parses "REGISTRY/REPOSITORY" (no tag, no digest), the target of a push.
func ParseRepository(s string) (Reference, error) {
	ref, err := registry.ParseReference(s)
	if err != nil || ref.Reference != "" {
		return Reference{}, refuse(ocipack.RefusalInvalidReference, "", ocipack.ErrInvalidReference)
	}
	return Reference{Registry: ref.Registry, Repository: ref.Repository}, nil
}

// IsLoopbackHost reports whether host ("name[:port]") is "localhost" or a literal loopback IP:
// the only registries plain HTTP may reach.
func IsLoopbackHost(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ParseManifest parses and checks a pack manifest: an OCI image manifest (schemaVersion 2,
// mediaType image manifest v1) with artifactType PackArtifactType, the empty config, between one
// and MaxLayers layers of ProfileMediaType, each within MaxLayerBytes and all within MaxTotalBytes.
// Unknown members are tolerated (the OCI spec allows them) but duplicate keys are not.
func ParseManifest(b []byte, lim Limits) (*ocispec.Manifest, error) {
	lim = lim.withDefaults()
	if int64(len(b)) > lim.MaxManifestBytes {
		return nil, refuse(ocipack.RefusalManifestTooLarge, "", ocipack.ErrManifestTooLarge)
	}
	if err := checkJSON(b); err != nil {
		return nil, refuse(ocipack.RefusalInvalidPack, "", ocipack.ErrInvalidPack)
	}
	var m ocispec.Manifest
	// Member names match exactly: encoding/json would accept "mediaTYPE" for "mediaType".
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(b, &m); err != nil {
		return nil, refuse(ocipack.RefusalInvalidPack, "", ocipack.ErrInvalidPack)
	}
	switch {
	case m.SchemaVersion != 2:
		return nil, refuse(ocipack.RefusalInvalidPack, "schemaVersion", ocipack.ErrInvalidPack)
	case m.MediaType != ocispec.MediaTypeImageManifest:
		return nil, refuse(ocipack.RefusalInvalidPack, "mediaType", ocipack.ErrInvalidPack)
	case m.ArtifactType != ocipack.PackArtifactType:
		return nil, refuse(ocipack.RefusalInvalidPack, "artifactType", ocipack.ErrInvalidPack)
	case m.Config.MediaType != ocispec.MediaTypeEmptyJSON || m.Config.Digest != ocispec.DescriptorEmptyJSON.Digest || m.Config.Size != ocispec.DescriptorEmptyJSON.Size:
		return nil, refuse(ocipack.RefusalInvalidPack, "config", ocipack.ErrInvalidPack)
	case len(m.Layers) == 0:
		return nil, refuse(ocipack.RefusalInvalidPack, "layers", ocipack.ErrInvalidPack)
	case len(m.Layers) > lim.MaxLayers:
		return nil, refuse(ocipack.RefusalTooManyLayers, "layers", ocipack.ErrTooManyLayers)
	}
	var total int64
	for i, l := range m.Layers {
		p := fmt.Sprintf("layers[%d]", i)
		if l.MediaType != ocipack.ProfileMediaType {
			return nil, refuse(ocipack.RefusalInvalidPack, p+".mediaType", ocipack.ErrInvalidPack)
		}
		if l.Digest.Validate() != nil || l.Digest.Algorithm() != digest.SHA256 || l.Size <= 0 {
			return nil, refuse(ocipack.RefusalInvalidPack, p+".digest", ocipack.ErrInvalidPack)
		}
		if l.Size > lim.MaxLayerBytes {
			return nil, refuse(ocipack.RefusalLayerTooLarge, p, ocipack.ErrLayerTooLarge)
		}
		total += l.Size
		if total > lim.MaxTotalBytes {
			return nil, refuse(ocipack.RefusalPackTooLarge, p, ocipack.ErrPackTooLarge)
		}
	}
	return &m, nil
}

// checkJSON refuses anything but exactly one JSON object without duplicate keys.
func checkJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return ocipack.ErrInvalidPack
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	_, err := snapshot.Canonicalize(b)
	return err
}

// refuse returns the named refusal of the pack format for a failed registry, verification or
// signing check.
func refuse(name string, path string, err error) *ocipack.RefusalError {
	return &ocipack.RefusalError{Name: name, Path: path, Err: err}
}
