package appoptions

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// loadTrustedRoot loads the trusted root: from the file v.TrustedRootPath, or live from the TUF
// repository v.TrustedRootTUFURL (trust anchored in the root.json at v.TrustedRootTUFRootPath,
// fetched through hc, refreshed every 24 hours), or nil (public keys only) when neither is set.
func (v *Verification) loadTrustedRoot(hc *http.Client) (root.TrustedMaterial, error) {
	switch {
	case v.TrustedRootTUFURL != "":
		var anchor []byte // nil: public-good Sigstore's root, built into sigstore-go (Validate)
		if v.TrustedRootTUFRootPath != "" {
			b, err := os.ReadFile(v.TrustedRootTUFRootPath)
			if err != nil {
				return nil, fmt.Errorf("--trusted-root-tuf-root: %w", err)
			}
			anchor = b
		}
		live, err := root.NewLiveTrustedRoot(ociregistry.TUFOptions(anchor, v.TrustedRootTUFURL, hc))
		if err != nil {
			return nil, fmt.Errorf("--trusted-root-tuf-url: %w", err)
		}
		return live, nil
	case v.TrustedRootPath != "":
		tr, err := ociregistry.LoadTrustedRoot(v.TrustedRootPath)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
	return nil, nil
}

// errTrustedRootSources is returned when both a file and a TUF repository are configured.
var errTrustedRootSources = errors.New("set at most one of --trusted-root and --trusted-root-tuf-url")
