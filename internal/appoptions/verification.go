package appoptions

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// Verification is the pack verification policy: what is waived in development, the trusted
// root of keyless verification, and the platform's own trust source (its signers and provenance
// rule). Its zero value is the production default.
type Verification struct {
	// SkipProvenanceUnsafe (--skip-provenance-unsafe) accepts inline profiles, and packs of a
	// trusted signer whose trust source lists no provenance rule on their signature alone: it
	// waives the merge verification. Development clusters only.
	SkipProvenanceUnsafe bool
	// KeylessWithoutTlogUnsafe (--keyless-without-tlog-unsafe) accepts keyless packs that carry
	// no transparency-log entry (a signed timestamp from the trusted root's TSA then suffices).
	KeylessWithoutTlogUnsafe bool
	// KeylessRequireSignedTimestamp (--keyless-require-signed-timestamp) also requires an
	// RFC 3161 signed timestamp on keyless packs.
	KeylessRequireSignedTimestamp bool
	// TrustedRootPath is a sigstore trusted_root.json for keyless verification (it overrides
	// the TUF default).
	TrustedRootPath string
	// TrustedRootTUFURL is the TUF repository serving trusted_root.json. Empty (the default):
	// public-good Sigstore's, ociregistry.PublicGoodTUFURL; TrustedRootTUFNone turns keyless
	// verification off. The trusted root is fetched through egress at the first keyless
	// verification (never at start, never for key-signed packs), kept, and fetched again at the
	// first use after 24 hours (KeylessTrust). TrustedRootTUFRootPath is the TUF root.json it is
	// anchored in (required, except for public-good Sigstore's repository, whose root sigstore-go
	// builds in).
	TrustedRootTUFURL, TrustedRootTUFRootPath string
	// BeforeTrustedRootFetch, when set, is called before every fetch of the trusted root over TUF
	// with the repository URL; an error fails that fetch before anything is dialed. It is no flag:
	// tests set it to prove that nothing is fetched (and nothing leaves the machine).
	BeforeTrustedRootFetch func(repoURL string) error
	// DefaultIssuer, DefaultSubject and DefaultSubjectRegExp form the platform's keyless signer
	// ("default-keyless" in the platform trust source).
	DefaultIssuer, DefaultSubject, DefaultSubjectRegExp string
	// DefaultPublicKeyPath is a PEM public key: the platform's key signer ("default-key").
	DefaultPublicKeyPath string
	// DefaultBuilderID, DefaultSourceRepository and DefaultSourceRef form the platform's
	// provenance rule.
	DefaultBuilderID, DefaultSourceRepository, DefaultSourceRef string
}

// BindFlags registers the verification flags on fs with v's values as defaults.
func (v *Verification) BindFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&v.SkipProvenanceUnsafe, "skip-provenance-unsafe", v.SkipProvenanceUnsafe, "Development only: accept inline profiles, and packs of a trusted signer whose trust source lists no provenance rule on their signature alone (waives merge verification).")
	fs.Var(removedFlag("--require-provenance was removed: provenance is always required; --skip-provenance-unsafe waives it (development only)"), "require-provenance", "Removed: see --skip-provenance-unsafe.")
	fs.Lookup("require-provenance").NoOptDefVal = "true"
	_ = fs.MarkHidden("require-provenance")
	fs.BoolVar(&v.KeylessWithoutTlogUnsafe, "keyless-without-tlog-unsafe", v.KeylessWithoutTlogUnsafe, "Accept keyless packs without a transparency-log entry (a signed timestamp from the trusted root's TSA then suffices).")
	fs.BoolVar(&v.KeylessRequireSignedTimestamp, "keyless-require-signed-timestamp", v.KeylessRequireSignedTimestamp, "Also require an RFC 3161 signed timestamp on keyless packs.")
	fs.StringVar(&v.TrustedRootPath, "trusted-root", v.TrustedRootPath, "Path of a sigstore trusted_root.json for keyless verification (instead of TUF; for clusters that do not reach it).")
	fs.StringVar(&v.TrustedRootTUFURL, "trusted-root-tuf-url", v.TrustedRootTUFURL, "TUF repository serving trusted_root.json for keyless verification, fetched through egress at the first keyless verification and refreshed daily (default: public-good Sigstore, "+ociregistry.PublicGoodTUFURL+"; \""+TrustedRootTUFNone+"\": keyless verification off).")
	fs.StringVar(&v.TrustedRootTUFRootPath, "trusted-root-tuf-root", v.TrustedRootTUFRootPath, "TUF root.json that anchors --trusted-root-tuf-url (default for "+ociregistry.PublicGoodTUFURL+": public-good Sigstore's root, built in).")
	fs.StringVar(&v.DefaultIssuer, "default-identity-issuer", v.DefaultIssuer, "OIDC issuer of the platform's keyless signer (trusted in every namespace).")
	fs.StringVar(&v.DefaultSubject, "default-identity-subject", v.DefaultSubject, "Exact certificate subject of the platform's keyless signer.")
	fs.StringVar(&v.DefaultSubjectRegExp, "default-identity-subject-regexp", v.DefaultSubjectRegExp, "Anchored (^...$) certificate subject regular expression of the platform's keyless signer.")
	fs.StringVar(&v.DefaultPublicKeyPath, "default-public-key", v.DefaultPublicKeyPath, "PEM public key of the platform's key signer (trusted in every namespace).")
	fs.StringVar(&v.DefaultBuilderID, "default-builder-id", v.DefaultBuilderID, "SLSA builder.id the platform's provenance rule requires (optional).")
	fs.StringVar(&v.DefaultSourceRepository, "default-source-repository", v.DefaultSourceRepository, "Source repository (primary source) the platform's provenance rule requires.")
	fs.StringVar(&v.DefaultSourceRef, "default-source-ref", v.DefaultSourceRef, "Source ref (e.g. refs/heads/main) the platform's provenance rule requires.")
}

// removedFlag is a flag that was removed: setting it fails with a message naming its successor.
type removedFlag string

func (r removedFlag) String() string   { return "" }
func (r removedFlag) Set(string) error { return errors.New(string(r)) }
func (r removedFlag) Type() string     { return "bool" }

// Validate checks the platform signer, its provenance rule and the trusted root source.
func (v *Verification) Validate() error {
	var errs []error
	if (v.DefaultSubject != "" || v.DefaultSubjectRegExp != "") && v.DefaultIssuer == "" {
		errs = append(errs, errors.New("--default-identity-subject needs --default-identity-issuer"))
	}
	if v.DefaultSubject != "" && v.DefaultSubjectRegExp != "" {
		errs = append(errs, errors.New("set at most one of --default-identity-subject and --default-identity-subject-regexp"))
	}
	if v.DefaultIssuer != "" && v.DefaultSubject == "" && v.DefaultSubjectRegExp == "" {
		errs = append(errs, errors.New("--default-identity-issuer needs --default-identity-subject or --default-identity-subject-regexp"))
	}
	if v.DefaultSubjectRegExp != "" {
		if err := ociregistry.CheckSubjectRegExp(v.DefaultSubjectRegExp); err != nil {
			errs = append(errs, fmt.Errorf("--default-identity-subject-regexp: %w", err))
		}
	}
	if (v.DefaultSourceRepository == "") != (v.DefaultSourceRef == "") {
		errs = append(errs, errors.New("--default-source-repository and --default-source-ref go together"))
	}
	if v.TrustedRootPath != "" && v.TrustedRootTUFURL != "" {
		errs = append(errs, errTrustedRootSources)
	}
	tuf := v.TrustedRootTUFURL != "" && v.TrustedRootTUFURL != TrustedRootTUFNone
	if tuf {
		if err := validateTUFURL(v.TrustedRootTUFURL); err != nil {
			errs = append(errs, err)
		}
	}
	// Public-good Sigstore's repository is anchored in the root built into sigstore-go; any other
	// needs its own root.json.
	if (!tuf && v.TrustedRootTUFRootPath != "") ||
		(tuf && v.TrustedRootTUFURL != ociregistry.PublicGoodTUFURL && v.TrustedRootTUFRootPath == "") {
		errs = append(errs, errors.New("--trusted-root-tuf-url and --trusted-root-tuf-root go together (the root may be left out only for public-good Sigstore, "+ociregistry.PublicGoodTUFURL+")"))
	}
	return errors.Join(errs...)
}

// WaivedChecks lists the checks v waives by an unsafe option, as shown in every verified
// profile's status.verified.waivedChecks, with the flag that waives each.
func (v *Verification) WaivedChecks() (checks, flags []string) {
	if v.SkipProvenanceUnsafe {
		checks, flags = append(checks, adapters.WaivedProvenance), append(flags, "--skip-provenance-unsafe")
	}
	if v.KeylessWithoutTlogUnsafe {
		checks, flags = append(checks, adapters.WaivedKeylessTlog), append(flags, "--keyless-without-tlog-unsafe")
	}
	return checks, flags
}

// platformSource is the platform's own trust source from the --default-* flags, or nil when they
// name no signer.
func (v *Verification) platformSource() (*adapters.TrustSource, error) {
	src := &adapters.TrustSource{Name: adapters.TrustSourcePlatform}
	if v.DefaultIssuer != "" {
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-keyless",
			Keyless: &v1.KeylessIdentity{Issuer: v.DefaultIssuer, Subject: v.DefaultSubject, SubjectRegExp: v.DefaultSubjectRegExp}})
	}
	if v.DefaultPublicKeyPath != "" {
		pem, err := os.ReadFile(v.DefaultPublicKeyPath)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		k, err := ociregistry.ParsePublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-key", PublicKey: k})
	}
	if v.DefaultSourceRepository != "" {
		src.Provenance = []v1.ProvenancePolicy{{BuilderID: v.DefaultBuilderID, SourceRepository: v.DefaultSourceRepository, SourceRef: v.DefaultSourceRef}}
	}
	if len(src.Signers) == 0 {
		return nil, nil
	}
	return src, nil
}
