package appoptions

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"

	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// loadTrustedRoot loads the trusted root: from the file v.TrustedRootPath, or live from the TUF
// repository v.TrustedRootTUFURL (trust anchored in the root.json at v.TrustedRootTUFRootPath,
// fetched through hc, refreshed every 24 hours), or nil (public keys only) when neither is set.
func (v *Verification) loadTrustedRoot(hc *http.Client) (root.TrustedMaterial, error) {
	switch {
	case v.TrustedRootTUFURL != "":
		anchor, err := os.ReadFile(v.TrustedRootTUFRootPath)
		if err != nil {
			return nil, fmt.Errorf("--trusted-root-tuf-root: %w", err)
		}
		opts := tuf.DefaultOptions().WithRoot(anchor).WithRepositoryBaseURL(v.TrustedRootTUFURL).
			WithDisableLocalCache().WithFetcher(&tufFetcher{hc: hc})
		live, err := root.NewLiveTrustedRoot(opts)
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

// tufFetcher fetches TUF metadata and targets through the registry's egress HTTP client: one
// attempt, bounded by the length the TUF client expects.
type tufFetcher struct{ hc *http.Client }

// DownloadFile implements go-tuf's fetcher.Fetcher.
func (f *tufFetcher) DownloadFile(u string, maxLength int64, _ time.Duration) ([]byte, error) {
	resp, err := f.hc.Get(u) //nolint:noctx // the go-tuf fetcher interface carries no context; the egress client has a deadline
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, &metadata.ErrDownloadHTTP{StatusCode: resp.StatusCode, URL: u}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLength+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: "TUF download larger than expected"}
	}
	return data, nil
}

// errTrustedRootSources is returned when both a file and a TUF repository are configured.
var errTrustedRootSources = errors.New("set at most one of --trusted-root and --trusted-root-tuf-url")
