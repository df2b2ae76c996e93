package managerapp

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// loadTrustedRoot loads the trusted root: from the file o.TrustedRootPath, or live from the TUF
// repository o.TrustedRootTUFURL (trust anchored in the root.json at o.TrustedRootTUFRootPath,
// fetched through hc, refreshed every 24 hours), or nil (public keys only) when neither is set.
func loadTrustedRoot(o Options, hc *http.Client) (root.TrustedMaterial, error) {
	switch {
	case o.TrustedRootTUFURL != "":
		anchor, err := os.ReadFile(o.TrustedRootTUFRootPath)
		if err != nil {
			return nil, fmt.Errorf("--trusted-root-tuf-root: %w", err)
		}
		live, err := root.NewLiveTrustedRoot(ociregistry.TUFOptions(anchor, o.TrustedRootTUFURL, hc))
		if err != nil {
			return nil, fmt.Errorf("--trusted-root-tuf-url: %w", err)
		}
		return live, nil
	case o.TrustedRootPath != "":
		tr, err := ociregistry.LoadTrustedRoot(o.TrustedRootPath)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
	return nil, nil
}

// errTrustedRootSources is returned when both a file and a TUF repository are configured.
var errTrustedRootSources = errors.New("set at most one of --trusted-root and --trusted-root-tuf-url")
