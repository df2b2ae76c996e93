package app

import (
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/b10x/connector-mcp/ocipack"
)

// loadTrustedRoot loads the trusted root, or returns nil (public keys only) for an empty path.
func loadTrustedRoot(path string) (root.TrustedMaterial, error) {
	if path == "" {
		return nil, nil
	}
	tr, err := ocipack.LoadTrustedRoot(path)
	if err != nil {
		return nil, err
	}
	return tr, nil
}
