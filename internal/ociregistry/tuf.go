package ociregistry

import (
	"io"
	"net/http"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// PublicGoodTUFURL is the TUF repository of sigstore's public-good instance, whose root
// sigstore-go embeds: the trust of keyless verification when no trusted_root.json is given.
const PublicGoodTUFURL = tuf.DefaultMirror

// TUFOptions returns the options of a TUF client for the repository at repoURL (empty: the
// public-good one), anchored in the TUF root.json anchor (nil: the public-good root sigstore-go
// embeds), fetching every file through hc (one attempt, bounded by the length TUF expects), with
// no local cache: each process starts from its anchor.
func TUFOptions(anchor []byte, repoURL string, hc *http.Client) *tuf.Options {
	opts := tuf.DefaultOptions().WithDisableLocalCache().WithFetcher(&tufFetcher{hc: hc})
	if anchor != nil {
		opts = opts.WithRoot(anchor)
	}
	if repoURL != "" {
		opts = opts.WithRepositoryBaseURL(repoURL)
	}
	return opts
}

// FetchTrustedRoot fetches trusted_root.json once from the TUF repository of opts (TUFOptions)
// and returns it: the CLI's trust for keyless verification. The manager keeps a live one
// (root.NewLiveTrustedRoot), refreshed daily.
func FetchTrustedRoot(opts *tuf.Options) (*root.TrustedRoot, error) {
	return root.FetchTrustedRootWithOptions(opts)
}

// tufFetcher fetches TUF metadata and targets through an egress HTTP client: one attempt,
// bounded by the length the TUF client expects.
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
