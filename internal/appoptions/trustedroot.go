package appoptions

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/webhookpost"
)

// TrustedRootTUFNone is the --trusted-root-tuf-url that turns keyless verification off (an
// air-gapped cluster without a trusted_root.json): nothing is fetched, and a keyless signer is
// refused (invalid_policy at trustedRoot); key-signed packs verify as before.
const TrustedRootTUFNone = "none"

// maxTUFAnchorBytes bounds the TUF root.json read from --trusted-root-tuf-root.
const maxTUFAnchorBytes = 1 << 20

// Kinds of keyless trust (KeylessTrust.Kind).
const (
	// KeylessTrustFile: a trusted_root.json file (--trusted-root), read at start.
	KeylessTrustFile = "file"
	// KeylessTrustTUF: a TUF repository, fetched at the first keyless verification.
	KeylessTrustTUF = "tuf"
	// KeylessTrustNone: keyless verification is off (--trusted-root-tuf-url=none).
	KeylessTrustNone = "none"
)

// KeylessTrust is where keyless verification takes its trusted root from, as resolved from the
// flags: what the manager logs at start.
type KeylessTrust struct {
	// Kind is KeylessTrustFile, KeylessTrustTUF or KeylessTrustNone.
	Kind string
	// Path is the trusted_root.json (file) or the TUF root.json anchor (TUF; empty: the root
	// built into sigstore-go, which anchors public-good Sigstore's repository only).
	Path string
	// URL is the TUF repository (TUF only).
	URL string
}

// KeylessTrust resolves the keyless trust of v: --trusted-root FILE, else --trusted-root-tuf-url
// (none: off), else public-good Sigstore's TUF repository (ociregistry.PublicGoodTUFURL)
// anchored in sigstore-go's built-in root, fetched only when a keyless signature is first
// checked.
func (v *Verification) KeylessTrust() KeylessTrust {
	switch {
	case v.TrustedRootPath != "":
		return KeylessTrust{Kind: KeylessTrustFile, Path: v.TrustedRootPath}
	case v.TrustedRootTUFURL == TrustedRootTUFNone:
		return KeylessTrust{Kind: KeylessTrustNone}
	case v.TrustedRootTUFURL != "":
		return KeylessTrust{Kind: KeylessTrustTUF, URL: v.TrustedRootTUFURL, Path: v.TrustedRootTUFRootPath}
	}
	return KeylessTrust{Kind: KeylessTrustTUF, URL: ociregistry.PublicGoodTUFURL}
}

// String describes k for the start log (the URL is a flag value: validated to carry no
// credentials or query).
func (k KeylessTrust) String() string {
	switch k.Kind {
	case KeylessTrustFile:
		return "file " + k.Path
	case KeylessTrustNone:
		return "none (keyless verification is off)"
	}
	anchor := k.Path
	if anchor == "" {
		anchor = "the root built into sigstore-go"
	}
	return "TUF " + k.URL + " anchored in " + anchor + ", fetched at the first keyless verification"
}

// trustedRoot returns the keyless trust of v (KeylessTrust): a trusted root loaded from its file
// now, or the lazy TUF source (ociregistry.TUFTrustedRoot) that fetches through hc when a keyless
// signature is first checked and nothing before, or neither (keyless off). Building it dials
// nothing.
func (v *Verification) trustedRoot(hc *http.Client) (root.TrustedMaterial, *ociregistry.TUFTrustedRoot, error) {
	k := v.KeylessTrust()
	switch k.Kind {
	case KeylessTrustFile:
		tr, err := ociregistry.LoadTrustedRoot(k.Path)
		if err != nil {
			return nil, nil, err
		}
		return tr, nil, nil
	case KeylessTrustNone:
		return nil, nil, nil
	}
	var anchor []byte // nil: public-good Sigstore's root, built into sigstore-go (Validate)
	if k.Path != "" {
		b, err := webhookpost.ReadFileBounded(k.Path, maxTUFAnchorBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("--trusted-root-tuf-root: %w", err)
		}
		anchor = b
	}
	src, err := ociregistry.NewTUFTrustedRoot(k.URL, anchor, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("--trusted-root-tuf-root: %w", err)
	}
	src.BeforeFetch = v.BeforeTrustedRootFetch
	return nil, src, nil
}

// validateTUFURL checks a --trusted-root-tuf-url: https (plain http only to loopback, for
// development), no user information, query or fragment (the URL is logged at start).
func validateTUFURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("--trusted-root-tuf-url must be an absolute https URL or " + TrustedRootTUFNone)
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !ociregistry.IsLoopbackHost(u.Host)) {
		return errors.New("--trusted-root-tuf-url must be an https URL (plain http only to loopback)")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("--trusted-root-tuf-url must carry no user information, query or fragment")
	}
	return nil
}

// errTrustedRootSources is returned when both a file and a TUF repository are configured.
var errTrustedRootSources = errors.New("set at most one of --trusted-root and --trusted-root-tuf-url")
