package ociregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"

	"github.com/b10x/connector-mcp/internal/netcause"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
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
// and returns it: the CLI's trust for keyless verification. The manager keeps a lazy one
// (TUFTrustedRoot), fetched at its first keyless verification and refreshed daily.
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

// TrustedRootSource supplies the trusted root of keyless verification when a keyless signature
// is first checked (WithTrustedRootSource), so that a verifier that never meets one never fetches
// it.
type TrustedRootSource interface {
	// TrustedRoot returns the trusted root, or a *TrustedRootError when it cannot be had.
	TrustedRoot(ctx context.Context) (root.TrustedMaterial, error)
}

// Defaults of a TUFTrustedRoot.
const (
	// DefaultTUFRefresh is how old a fetched trusted root may grow before the next keyless
	// verification fetches it again (sigstore-go's live trusted root refreshes daily too).
	DefaultTUFRefresh = 24 * time.Hour
	// DefaultTUFRetryAfter is how long a failed fetch is remembered before a verification tries
	// again: however many profiles verify at once, the repository sees at most one attempt per
	// interval.
	DefaultTUFRetryAfter = 5 * time.Second
)

// TUFTrustedRoot is the trusted root of a TUF repository, fetched lazily: nothing is fetched
// until TrustedRoot is first called (a keyless signature is being checked), the result is kept,
// and it is fetched again at the first use after Refresh. A fetch that fails is a
// *TrustedRootError (retried by the caller; not retried here before RetryAfter); a refresh that
// fails keeps the root already fetched, as sigstore-go's live trusted root does. Every fetch goes
// through the HTTP client it was made with (the egress client), starting from the anchor: no
// local cache. It is safe for concurrent use; concurrent callers share one fetch.
type TUFTrustedRoot struct {
	// Refresh, RetryAfter and Now (the clock) default to DefaultTUFRefresh, DefaultTUFRetryAfter
	// and time.Now. Set them before the first use.
	Refresh, RetryAfter time.Duration
	Now                 func() time.Time
	// BeforeFetch, when set, is called before every fetch with the repository URL; an error fails
	// the fetch before anything is dialed (a test's guard that nothing leaves the machine).
	BeforeFetch func(repoURL string) error

	url     string
	anchor  []byte
	hc      *http.Client
	fetches atomic.Int64

	mu        sync.Mutex
	tr        *root.TrustedRoot
	fetchedAt time.Time
	failed    *TrustedRootError
	failedAt  time.Time
}

// NewTUFTrustedRoot returns the lazy trusted root of the TUF repository at repoURL, anchored in
// the TUF root.json anchor (nil: public-good Sigstore's root, built into sigstore-go; only for
// PublicGoodTUFURL), fetched through hc. It fetches nothing; an anchor that is not TUF root
// metadata is refused here (refusal "invalid_trusted_root").
func NewTUFTrustedRoot(repoURL string, anchor []byte, hc *http.Client) (*TUFTrustedRoot, error) {
	if anchor != nil {
		if _, err := metadata.Root().FromBytes(anchor); err != nil {
			return nil, refuse(ocipack.RefusalInvalidTrustedRoot, "", fmt.Errorf("%w: the TUF root.json does not parse", ocipack.ErrInvalidPolicy))
		}
	}
	return &TUFTrustedRoot{url: repoURL, anchor: anchor, hc: hc}, nil
}

// URL returns the repository's URL.
func (t *TUFTrustedRoot) URL() string { return t.url }

// BuiltInAnchor reports whether the repository is anchored in the root built into sigstore-go
// (public-good Sigstore's) rather than a root.json of its own.
func (t *TUFTrustedRoot) BuiltInAnchor() bool { return t.anchor == nil }

// Fetches returns how many fetches were attempted so far.
func (t *TUFTrustedRoot) Fetches() int64 { return t.fetches.Load() }

// TrustedRoot implements TrustedRootSource: the kept root while it is younger than Refresh, else
// a fresh fetch (see TUFTrustedRoot).
func (t *TUFTrustedRoot) TrustedRoot(ctx context.Context) (root.TrustedMaterial, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.tr != nil && now.Sub(t.fetchedAt) < t.refresh() {
		return t.tr, nil
	}
	if t.failed != nil && now.Sub(t.failedAt) < t.retryAfter() {
		if t.tr != nil {
			return t.tr, nil
		}
		return nil, t.failed
	}
	tr, err := t.fetch()
	if err != nil {
		t.failed, t.failedAt = err, now
		if t.tr != nil {
			return t.tr, nil // a failed refresh keeps the root fetched before
		}
		return nil, err
	}
	t.tr, t.fetchedAt, t.failed = tr, now, nil
	return tr, nil
}

func (t *TUFTrustedRoot) fetch() (*root.TrustedRoot, *TrustedRootError) {
	t.fetches.Add(1)
	if t.BeforeFetch != nil {
		if err := t.BeforeFetch(t.url); err != nil {
			return nil, &TrustedRootError{Cause: TrustedRootCauseRefused, Err: err}
		}
	}
	tr, err := FetchTrustedRoot(TUFOptions(t.anchor, t.url, t.hc))
	if err != nil {
		cause, status := trustedRootCause(err)
		return nil, &TrustedRootError{Cause: cause, Status: status, Err: err}
	}
	return tr, nil
}

func (t *TUFTrustedRoot) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *TUFTrustedRoot) refresh() time.Duration {
	if t.Refresh > 0 {
		return t.Refresh
	}
	return DefaultTUFRefresh
}

func (t *TUFTrustedRoot) retryAfter() time.Duration {
	if t.RetryAfter > 0 {
		return t.RetryAfter
	}
	return DefaultTUFRetryAfter
}

// Causes of a TrustedRootError beside the network classes of internal/netcause and the refusal
// names of the egress policy.
const (
	// TrustedRootCauseHTTPStatus: the repository answered a file with another status than 200.
	TrustedRootCauseHTTPStatus = "http_status"
	// TrustedRootCauseUnverified: the repository's metadata does not verify against its anchor
	// (other keys, expired, rolled back), or trusted_root.json does not parse.
	TrustedRootCauseUnverified = "metadata_unverified"
	// TrustedRootCauseRefused: the fetch was refused before anything was dialed (BeforeFetch).
	TrustedRootCauseRefused = "fetch_refused"
)

// TrustedRootError is a failure to fetch the trusted root of keyless verification over TUF: not
// a verdict on any pack, and retried (refusal "trusted_root_unavailable", errors.Is
// ocipack.ErrTrustedRootUnavailable). Its text is the cause class only: never the repository's
// URL, a file name or what the repository answered.
type TrustedRootError struct {
	// Cause is the class of the failure: a class of internal/netcause (dns, connection_refused,
	// timeout, tls, ...), an egress refusal name, or a TrustedRootCause* constant.
	Cause string
	// Status is the HTTP status of a TrustedRootCauseHTTPStatus failure.
	Status int
	// Err is the underlying error (it may carry URLs: for errors.Is and As, never shown).
	Err error
}

// Error names the cause class.
func (e *TrustedRootError) Error() string {
	return "keyless trusted root over TUF unavailable (" + e.TrustedRootCause() + ")"
}

// Refusal returns ocipack.RefusalTrustedRootUnavailable.
func (e *TrustedRootError) Refusal() string { return ocipack.RefusalTrustedRootUnavailable }

// TrustedRootCause returns the cause class, with the status of an HTTP status failure
// ("http_status 503"). It lets the activation table (internal/activation) name the cause without
// importing this package.
func (e *TrustedRootError) TrustedRootCause() string {
	if e.Cause == TrustedRootCauseHTTPStatus && e.Status > 0 {
		return e.Cause + " " + strconv.Itoa(e.Status)
	}
	return e.Cause
}

// Unwrap returns ocipack.ErrTrustedRootUnavailable and the underlying error.
func (e *TrustedRootError) Unwrap() []error { return []error{ocipack.ErrTrustedRootUnavailable, e.Err} }

// trustedRootCause classifies a failed TUF fetch: network classes first, then an HTTP status (with
// the status), an egress refusal, and anything else as metadata that does not verify.
func trustedRootCause(err error) (string, int) {
	if c := netcause.Of(err); c != "" {
		return c, 0
	}
	var he *metadata.ErrDownloadHTTP
	if errors.As(err, &he) {
		return TrustedRootCauseHTTPStatus, he.StatusCode
	}
	if n := refusal.Name(err); n != "" {
		return n, 0
	}
	return TrustedRootCauseUnverified, 0
}
