package ociregistry

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// Predicate types recognised in pack bundles.
const (
	// PredicateSLSAProvenanceV1 is the SLSA provenance v1 predicate type an attestation must carry.
	PredicateSLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// PredicateCosignSign is the predicate type of a plain cosign signature statement
	// (cosign sign --new-bundle-format).
	PredicateCosignSign = "https://sigstore.dev/cosign/sign/v1"
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// InTotoStatementV1 is the in-toto statement type.
	InTotoStatementV1 = "https://in-toto.io/Statement/v1"
)

// Policy is what a pack must satisfy: exactly one identity (keyless or public key) and, unless
// SkipProvenanceUnsafe is set, a provenance policy.
type Policy struct {
	// Keyless matches the Fulcio certificate: OIDC issuer exactly, and the subject (SAN) exactly or
	// by Go regular expression. A Verifier made WithStrictKeyless refuses an expression that is
	// not anchored (CheckSubjectRegExp).
	Keyless *apiv1.KeylessIdentity
	// PublicKey verifies bundles signed with a key (cosign --key).
	PublicKey crypto.PublicKey
	// Provenance is the SLSA provenance v1 policy: builder id (when set), source repository and
	// source ref (the merge verification).
	Provenance *apiv1.ProvenancePolicy
	// SkipProvenanceUnsafe accepts a pack with a valid signature and no provenance policy. It
	// drops the merge verification.
	SkipProvenanceUnsafe bool
}

// PolicyFromAPI converts the CRD's VerifyPolicy. publicKeyPEM is the content of the Secret key named
// by p.PublicKey (the caller reads the Secret); it is ignored for keyless policies.
func PolicyFromAPI(p *apiv1.VerifyPolicy, publicKeyPEM []byte) (Policy, error) {
	if p == nil {
		return Policy{}, refuse(ocipack.RefusalInvalidPolicy, "", ocipack.ErrInvalidPolicy)
	}
	out := Policy{Keyless: p.Keyless, Provenance: p.Provenance}
	if p.PublicKey != nil {
		k, err := ParsePublicKey(publicKeyPEM)
		if err != nil {
			return Policy{}, err
		}
		out.PublicKey = k
	}
	return out, out.Validate()
}

// ParsePublicKey parses a PEM public key (cosign.pub).
func ParsePublicKey(pemBytes []byte) (crypto.PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	return k, nil
}

// Validate checks the policy is complete and unambiguous.
func (p Policy) Validate() error {
	bad := func(path string) error { return refuse(ocipack.RefusalInvalidPolicy, path, ocipack.ErrInvalidPolicy) }
	switch {
	case p.Keyless != nil && p.PublicKey != nil:
		return bad("identity")
	case p.Keyless == nil && p.PublicKey == nil:
		return bad("identity")
	case p.Keyless != nil && p.Keyless.Issuer == "":
		return bad("keyless.issuer")
	case p.Keyless != nil && (p.Keyless.Subject == "") == (p.Keyless.SubjectRegExp == ""):
		return bad("keyless.subject")
	case p.Provenance == nil && !p.SkipProvenanceUnsafe:
		return bad("provenance")
	case p.Provenance != nil && (p.Provenance.SourceRepository == "" || p.Provenance.SourceRef == ""):
		return bad("provenance")
	}
	if p.Keyless != nil && p.Keyless.SubjectRegExp != "" {
		if _, err := regexp.Compile(p.Keyless.SubjectRegExp); err != nil {
			return bad("keyless.subjectRegExp")
		}
	}
	return nil
}

// CheckSubjectRegExp refuses a keyless subject regular expression that does not compile
// (refusal "invalid_policy") or is not anchored at both ends (refusal
// "unanchored_subject_regexp"). Go's regexp matches anywhere in the subject otherwise, so
// "^https://github\.com/acme/" would also match a workflow of any repository whose URL starts
// that way, on any branch.
//
// Anchoring is decided on the parsed expression (regexp/syntax), not on its text: every way
// through the expression must begin at the start of the text (^ or \A) and end at its end ($ or
// \z). So "^a|b$" (whose branch "^a" matches any subject starting with "a", and "b$" any ending
// with "b") is refused, while "^(a|b)$" and "^a$|^b$" are accepted. Multi-line anchors ((?m)^,
// (?m)$) match at a newline and do not count. The check is conservative: an expression anchored
// only through an empty-width construct this function does not model is refused.
func CheckSubjectRegExp(expr string) error {
	if _, err := regexp.Compile(expr); err != nil {
		return refuse(ocipack.RefusalInvalidPolicy, "keyless.subjectRegExp", ocipack.ErrInvalidPolicy)
	}
	re, err := syntax.Parse(expr, syntax.Perl) // the flags regexp.Compile parses with
	if err != nil {
		return refuse(ocipack.RefusalInvalidPolicy, "keyless.subjectRegExp", ocipack.ErrInvalidPolicy)
	}
	if !anchoredAt(re, true) || !anchoredAt(re, false) {
		return refuse(ocipack.RefusalUnanchoredSubjectRegExp, "keyless.subjectRegExp", ocipack.ErrUnanchoredSubjectRegExp)
	}
	return nil
}

// anchoredAt reports whether every match of re begins at the start of the text (start) or ends
// at its end (!start).
func anchoredAt(re *syntax.Regexp, start bool) bool {
	switch re.Op {
	case syntax.OpBeginText:
		return start
	case syntax.OpEndText:
		return !start
	case syntax.OpCapture:
		return anchoredAt(re.Sub[0], start)
	case syntax.OpPlus:
		return anchoredAt(re.Sub[0], start) // the first (last) repetition is anchored
	case syntax.OpRepeat:
		return re.Min >= 1 && anchoredAt(re.Sub[0], start)
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return false
		}
		if start {
			return anchoredAt(re.Sub[0], start)
		}
		return anchoredAt(re.Sub[len(re.Sub)-1], start)
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !anchoredAt(sub, start) {
				return false
			}
		}
		return len(re.Sub) > 0
	}
	return false
}

// fingerprint identifies the policy in the verification cache.
func (p Policy) fingerprint() string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		K *apiv1.KeylessIdentity
		P *apiv1.ProvenancePolicy
		S bool
	}{p.Keyless, p.Provenance, p.SkipProvenanceUnsafe})
	h.Write(b)
	if p.PublicKey != nil {
		der, _ := x509.MarshalPKIXPublicKey(p.PublicKey)
		h.Write([]byte{0})
		h.Write(der)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Result is a successful verification: who signed the pack and how it was built.
type Result struct {
	// Reference is the verified pack.
	Reference string `json:"reference"`
	// Issuer is the verified OIDC issuer (keyless).
	Issuer string `json:"issuer,omitempty"`
	// Subject is the verified certificate subject (keyless).
	Subject string `json:"subject,omitempty"`
	// KeyID is the public-key hint of the bundle (public-key policy).
	KeyID string `json:"keyID,omitempty"`
	// BuilderID is the provenance builder.id.
	BuilderID string `json:"builderID,omitempty"`
	// SourceRepository is the verified source repository.
	SourceRepository string `json:"sourceRepository,omitempty"`
	// SourceRef is the verified source ref.
	SourceRef string `json:"sourceRef,omitempty"`
	// SourceRevision is the source revision (commit) recorded in the provenance.
	SourceRevision string `json:"sourceRevision,omitempty"`
}

// VerifiedProvenance maps the result onto the McpServiceProfile status shape.
func (r *Result) VerifiedProvenance() apiv1.VerifiedProvenance {
	subject := r.Subject
	if subject == "" {
		subject = r.KeyID
	}
	return apiv1.VerifiedProvenance{
		Issuer: r.Issuer, Subject: subject, BuilderID: r.BuilderID,
		SourceRepository: r.SourceRepository, SourceRef: r.SourceRef, SourceRevision: r.SourceRevision,
	}
}

// Verifier verifies packs against a trusted root (keyless) or a public key, with a cache keyed by
// (pack reference with digest, policy): a repeat verification makes no registry request.
type Verifier struct {
	client  *Client
	trusted root.TrustedMaterial
	// source supplies the keyless trusted root lazily when trusted is nil
	// (WithTrustedRootSource).
	source TrustedRootSource
	tlog   int
	sct    int
	// keylessTlog and keylessTSA are the transparency evidence keyless bundles must carry.
	keylessTlog, keylessTSA int
	// strict refuses unanchored subject expressions and keyless certificates that certify no
	// source when a provenance policy applies.
	strict bool

	mu       sync.Mutex
	cache    map[string]Result
	cacheMax int
	// pending is the registry content of packs verified from the registry and not yet saved to
	// the client's Store (by reference), saved when the pack is pulled (Pull).
	pending map[string]*evidence
}

// maxPending bounds the verified packs awaiting their pull to be saved to the store.
const maxPending = 256

// VerifierOption configures a Verifier.
type VerifierOption func(*Verifier)

// WithTransparencyLog requires at least threshold verified transparency-log entries per bundle
// (as public-good Sigstore provides).
func WithTransparencyLog(threshold int) VerifierOption {
	return func(v *Verifier) { v.tlog = threshold }
}

// WithSignedCertificateTimestamps requires at least threshold signed certificate timestamps in
// keyless certificates.
func WithSignedCertificateTimestamps(threshold int) VerifierOption {
	return func(v *Verifier) { v.sct = threshold }
}

// WithKeylessTransparencyLog requires every keyless bundle to carry at least threshold
// transparency-log entries that verify against the trusted root's logs (refusal
// "missing_tlog_entry" when it carries none). Key-signed bundles are not affected (see
// WithTransparencyLog). Without a log entry a stolen or mis-issued short-lived certificate leaves
// no public trace.
func WithKeylessTransparencyLog(threshold int) VerifierOption {
	return func(v *Verifier) { v.keylessTlog = threshold }
}

// WithKeylessSignedTimestamps requires every keyless bundle to carry at least threshold RFC 3161
// signed timestamps from a timestamp authority of the trusted root (refusal
// "missing_signed_timestamp" when it carries none).
func WithKeylessSignedTimestamps(threshold int) VerifierOption {
	return func(v *Verifier) { v.keylessTSA = threshold }
}

// WithStrictKeyless makes keyless verification take only what the certificate authority
// certified: a subject regular expression must be anchored (CheckSubjectRegExp), and under a
// provenance policy the Fulcio certificate must carry the source repository and ref extensions
// (refusal "missing_certificate_source" otherwise). Certificate source extensions, when
// present, are always matched, strict or not.
func WithStrictKeyless() VerifierOption {
	return func(v *Verifier) { v.strict = true }
}

// WithTrustedRootSource makes keyless verification get its trusted root from src when the
// verifier was given none (NewVerifier's trusted is nil): only when a keyless policy meets a
// bundle that carries a certificate, so a verifier that checks only key-signed packs never asks
// src. When src fails (a *TrustedRootError) and no policy is satisfied, that failure is the
// verdict (refusal "trusted_root_unavailable": retried), not a signature refusal; nothing is
// cached.
func WithTrustedRootSource(src TrustedRootSource) VerifierOption {
	return func(v *Verifier) { v.source = src }
}

// WithCacheSize bounds the verification cache (default 256 entries; 0 disables it).
func WithCacheSize(n int) VerifierOption {
	return func(v *Verifier) { v.cacheMax = n }
}

// NewVerifier returns a verifier fetching through client. trusted is the trusted root for keyless
// verification (LoadTrustedRoot); it may be nil when only public-key policies are used.
func NewVerifier(client *Client, trusted root.TrustedMaterial, opts ...VerifierOption) *Verifier {
	v := &Verifier{client: client, trusted: trusted, cache: map[string]Result{}, cacheMax: 256, pending: map[string]*evidence{}}
	for _, o := range opts {
		o(v)
	}
	return v
}

// LoadTrustedRoot reads a sigstore trusted_root.json (self-hosted Fulcio, TSA, Rekor, CT logs).
// Public-good Sigstore is trusted only when its trusted_root.json is configured explicitly.
func LoadTrustedRoot(path string) (*root.TrustedRoot, error) {
	tr, err := root.NewTrustedRootFromPath(path)
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidTrustedRoot, "", fmt.Errorf("%w: %w", ocipack.ErrInvalidPolicy, err))
	}
	return tr, nil
}

// reason ranks how far a bundle got; the refusal reported is the furthest any bundle reached.
type reason struct {
	rank int
	name string
	err  error
}

var (
	reasonMissingSignature = reason{0, ocipack.RefusalMissingSignature, ocipack.ErrNoSignature}
	reasonUntrusted        = reason{1, ocipack.RefusalUntrustedSignature, ocipack.ErrUntrustedSignature}
	reasonWrongIssuer      = reason{2, ocipack.RefusalWrongIssuer, ocipack.ErrWrongIssuer}
	reasonWrongIdentity    = reason{3, ocipack.RefusalWrongIdentity, ocipack.ErrWrongIdentity}
	reasonWrongSubject     = reason{4, ocipack.RefusalWrongSubjectDigest, ocipack.ErrWrongSubjectDigest}
	reasonMissingTlog      = reason{1, ocipack.RefusalMissingTlogEntry, ocipack.ErrMissingTransparency}
	reasonMissingTimestamp = reason{1, ocipack.RefusalMissingSignedTimestamp, ocipack.ErrMissingTransparency}

	reasonMissingAttestation  = reason{0, ocipack.RefusalMissingAttestation, ocipack.ErrNoAttestation}
	reasonWrongPredicate      = reason{1, ocipack.RefusalWrongPredicateType, ocipack.ErrWrongPredicateType}
	reasonWrongBuilder        = reason{2, ocipack.RefusalWrongBuilder, ocipack.ErrWrongBuilder}
	reasonMissingCertSource   = reason{3, ocipack.RefusalMissingCertificateSource, ocipack.ErrCertificateSource}
	reasonWrongCertRepository = reason{4, ocipack.RefusalWrongCertificateSourceRepository, ocipack.ErrCertificateSource}
	reasonWrongCertRef        = reason{5, ocipack.RefusalWrongCertificateSourceRef, ocipack.ErrCertificateSource}
	reasonAmbiguousSource     = reason{6, ocipack.RefusalAmbiguousSource, ocipack.ErrAmbiguousSource}
	reasonPredicateDisagrees  = reason{7, ocipack.RefusalPredicateDisagreesWithCertificate, ocipack.ErrPredicateDisagreesWithCertificate}
	reasonWrongRepository     = reason{8, ocipack.RefusalWrongSourceRepository, ocipack.ErrWrongSourceRepository}
	reasonWrongRef            = reason{9, ocipack.RefusalWrongSourceRef, ocipack.ErrWrongSourceRef}
)

func (r reason) refusal(path string) error { return refuse(r.name, path, r.err) }

// verifiedBundle is a bundle whose signature, identity and subject digest verified.
type verifiedBundle struct {
	issuer, subject, keyID string
	predicateType          string
	predicate              []byte
	// certified is the source the Fulcio certificate extensions certify (keyless), nil when the
	// certificate carries none.
	certified *sourceFacts
	keyless   bool
}

// Verify checks the pack ref (pinned by digest) against policy: at least one sigstore bundle
// attached as a referrer must verify against the trusted root or key, match the identity policy
// and bind the pack digest (an in-toto statement whose subject is the pack digest); unless the
// policy skips provenance, one such bundle must be an SLSA provenance v1 attestation whose builder
// id, source repository and source ref match (the merge verification).
//
// The source is the predicate's primary source only (see primarySource): a resolved dependency
// that names the reviewed repository proves nothing. For a keyless bundle whose Fulcio
// certificate certifies a source (extensions SourceRepositoryURI and SourceRepositoryRef,
// OIDs 1.3.6.1.4.1.57264.1.12 and .14), that certified source must equal the policy
// ("git+https://host/org/repo" in a policy is the certificate's "https://host/org/repo"), and the
// predicate's primary source must agree with it, revision (SourceRepositoryDigest) included.
//
// A refusal names the furthest check any bundle reached: missing_signature,
// untrusted_signature, missing_tlog_entry, missing_signed_timestamp, wrong_issuer,
// wrong_identity, wrong_subject_digest, then missing_attestation, wrong_predicate_type,
// wrong_builder, missing_certificate_source, wrong_certificate_source_repository,
// wrong_certificate_source_ref, ambiguous_source, predicate_disagrees_with_certificate,
// wrong_source_repository, wrong_source_ref.
//
// Verify does not pull the pack's layers; pull them with Client.Pull, whose reads are verified
// against the same digest.
func (v *Verifier) Verify(ctx context.Context, ref Reference, policy Policy) (*Result, error) {
	_, res, err := v.VerifyAny(ctx, ref, []Policy{policy})
	return res, err
}

// VerifyAny verifies the pack ref against each of policies in turn, fetching its bundles once,
// and returns the index of the first policy it satisfies with its result. When it satisfies
// none, the refusal is the one of the policy whose check got furthest (attestation checks are
// further than signature checks; see Verify for the order); a policy that cannot be used at all
// (invalid key, keyless without a trusted root) counts as a missing signature. Every policy must
// Validate. It is how a pack is checked against a set of trusted signers and provenance rules.
func (v *Verifier) VerifyAny(ctx context.Context, ref Reference, policies []Policy) (int, *Result, error) {
	if ref.Digest == "" {
		return -1, nil, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	if len(policies) == 0 {
		return -1, nil, refuse(ocipack.RefusalInvalidPolicy, "", ocipack.ErrInvalidPolicy)
	}
	keys := make([]string, len(policies))
	for i, policy := range policies {
		if err := policy.Validate(); err != nil {
			return -1, nil, err
		}
		if v.strict && policy.Keyless != nil && policy.Keyless.SubjectRegExp != "" {
			if err := CheckSubjectRegExp(policy.Keyless.SubjectRegExp); err != nil {
				return -1, nil, err
			}
		}
		keys[i] = ref.String() + "|" + policy.fingerprint()
	}
	if v.cacheMax > 0 {
		v.mu.Lock()
		for i, key := range keys {
			if r, ok := v.cache[key]; ok {
				v.mu.Unlock()
				return i, &r, nil
			}
		}
		v.mu.Unlock()
	}
	var refs []Referrer
	fetched, stored := false, false
	bestScore := -1
	var bestErr, unavailable error
	for i, policy := range policies {
		// lazy: the trusted root of this keyless policy is asked of the source once the bundles
		// show a certificate to check.
		lazy := policy.Keyless != nil && v.trusted == nil && v.source != nil
		var sv *verify.Verifier
		var err error
		if !lazy {
			if sv, err = v.sigstoreVerifier(policy, v.trusted); err != nil {
				if len(policies) == 1 {
					return -1, nil, err
				}
				if bestScore < 0 {
					bestScore, bestErr = 0, err
				}
				continue
			}
		}
		if !fetched {
			if refs, stored, err = v.client.bundles(ctx, ref); err != nil {
				return -1, nil, err
			}
			fetched = true
		}
		if lazy && anyCertificate(refs) {
			material, err := v.source.TrustedRoot(ctx)
			if err != nil {
				unavailable = err
				continue
			}
			if sv, err = v.sigstoreVerifier(policy, material); err != nil {
				if len(policies) == 1 {
					return -1, nil, err
				}
				if bestScore < 0 {
					bestScore, bestErr = 0, err
				}
				continue
			}
		}
		// sv is nil for a lazy keyless policy and bundles without a certificate: none of them
		// can satisfy it, and checkBundle says why without a trusted root.
		res, why, score := v.evaluate(sv, refs, ref, policy)
		if res == nil {
			if score > bestScore {
				bestScore, bestErr = score, why.refusal(ref.Digest)
			}
			continue
		}
		if v.cacheMax > 0 {
			v.mu.Lock()
			if len(v.cache) >= v.cacheMax {
				for k := range v.cache { // evict an arbitrary entry
					delete(v.cache, k)
					break
				}
			}
			v.cache[keys[i]] = *res
			v.mu.Unlock()
		}
		if !stored && v.client.storeUsable() {
			v.remember(ref, refs)
		}
		return i, res, nil
	}
	if unavailable != nil {
		// A keyless policy could not be checked: no verdict, the caller retries.
		return -1, nil, unavailable
	}
	return -1, nil, bestErr
}

// anyCertificate reports whether one of refs' bundles carries a certificate (a keyless
// signature): only then does a keyless policy need the trusted root.
func anyCertificate(refs []Referrer) bool {
	for _, rf := range refs {
		var b bundle.Bundle
		if b.UnmarshalJSON(rf.Bundle) != nil {
			continue
		}
		if vc, err := b.VerificationContent(); err == nil && vc.Certificate() != nil {
			return true
		}
	}
	return false
}

// evaluate checks the fetched bundles against one policy. On refusal it returns the reason and
// a score of how far the checks got (signature stage 1+rank, attestation stage 100+rank).
func (v *Verifier) evaluate(sv *verify.Verifier, refs []Referrer, ref Reference, policy Policy) (*Result, reason, int) {
	digestHex := strings.TrimPrefix(ref.Digest, "sha256:")
	best := reasonMissingSignature
	var verified []verifiedBundle
	for _, rf := range refs {
		vb, why := v.checkBundle(sv, rf.Bundle, policy, digestHex)
		if vb == nil {
			if why.rank > best.rank {
				best = why
			}
			continue
		}
		verified = append(verified, *vb)
	}
	if len(verified) == 0 {
		return nil, best, 1 + best.rank
	}
	res := &Result{Reference: ref.String()}
	fill := func(b verifiedBundle) {
		res.Issuer, res.Subject, res.KeyID = b.issuer, b.subject, b.keyID
	}
	fill(verified[0])
	if policy.Provenance == nil {
		return res, reason{}, 0
	}
	best = reasonMissingAttestation
	for _, b := range verified {
		if b.predicateType == PredicateCosignSign {
			continue
		}
		if b.predicateType != PredicateSLSAProvenanceV1 {
			if reasonWrongPredicate.rank > best.rank {
				best = reasonWrongPredicate
			}
			continue
		}
		src, why := v.checkSource(b, policy.Provenance)
		if src == nil {
			if why.rank > best.rank {
				best = why
			}
			continue
		}
		fill(b)
		res.BuilderID, res.SourceRepository, res.SourceRef, res.SourceRevision = src.builder, src.repository, src.ref, src.revision
		return res, reason{}, 0
	}
	return nil, best, 100 + best.rank
}

// VerifyAndPull verifies the pack ref against policy (Verify), then pulls it (Client.Pull): every
// layer read through a digest-verifying reader, decoded strictly and validated. This is the
// "source verified" stage of activation.
func (v *Verifier) VerifyAndPull(ctx context.Context, ref Reference, policy Policy) (*Result, *Pack, error) {
	res, err := v.Verify(ctx, ref, policy)
	if err != nil {
		return nil, nil, err
	}
	p, err := v.Pull(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	return res, p, nil
}

// Pull pulls the pack ref through the verifier's client (Client.Pull). Call it after Verify or
// VerifyAny succeeded for the same ref. When the client has a Store and this verifier verified
// ref from the registry, the content both read is saved to the store (best effort: a store that
// fails to save reports it itself, and the save is tried again on the next Pull).
func (v *Verifier) Pull(ctx context.Context, ref Reference) (*Pack, error) {
	p, stored, err := v.client.pull(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !stored && v.client.storeUsable() {
		v.save(ctx, p)
	}
	return p, nil
}

// remember keeps the registry content of the verified pack ref until it is pulled.
func (v *Verifier) remember(ref Reference, refs []Referrer) {
	e := evidenceOf(refs)
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.pending[ref.String()]; !ok && len(v.pending) >= maxPending {
		for k := range v.pending { // drop an arbitrary entry: it is saved at its next verification
			delete(v.pending, k)
			break
		}
	}
	v.pending[ref.String()] = e
}

// save stores the verified and pulled pack p with the evidence remembered for it, if any.
func (v *Verifier) save(ctx context.Context, p *Pack) {
	key := p.Reference.String()
	v.mu.Lock()
	e := v.pending[key]
	v.mu.Unlock()
	if e == nil {
		return
	}
	err := v.client.Store.Save(ctx, e.record(p))
	if err != nil && !errors.Is(err, ErrStoreTooLarge) && !errors.Is(err, ErrStoreReadOnly) {
		return // kept: tried again on the next Pull
	}
	v.mu.Lock()
	if v.pending[key] == e {
		delete(v.pending, key)
	}
	v.mu.Unlock()
}

// sigstoreVerifier builds the sigstore verifier of policy p, keyless against trusted.
func (v *Verifier) sigstoreVerifier(p Policy, trusted root.TrustedMaterial) (*verify.Verifier, error) {
	var opts []verify.VerifierOption
	var material root.TrustedMaterial
	if p.PublicKey != nil {
		sv, err := signature.LoadDefaultVerifier(p.PublicKey)
		if err != nil {
			return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
		}
		key := root.NewExpiringKey(sv, timeZero, timeZero)
		material = root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
		if v.tlog > 0 && trusted != nil {
			material = root.TrustedMaterialCollection{trusted, material}
			opts = append(opts, verify.WithTransparencyLog(v.tlog), verify.WithIntegratedTimestamps(v.tlog))
		} else {
			opts = append(opts, verify.WithNoObserverTimestamps())
		}
	} else {
		if trusted == nil {
			return nil, refuse(ocipack.RefusalInvalidPolicy, "trustedRoot", ocipack.ErrInvalidPolicy)
		}
		material = trusted
		opts = append(opts, verify.WithObserverTimestamps(1))
		if n := max(v.tlog, v.keylessTlog); n > 0 {
			opts = append(opts, verify.WithTransparencyLog(n))
		}
		if v.keylessTSA > 0 {
			opts = append(opts, verify.WithSignedTimestamps(v.keylessTSA))
		}
		if v.sct > 0 {
			opts = append(opts, verify.WithSignedCertificateTimestamps(v.sct))
		}
	}
	sv, err := verify.NewVerifier(material, opts...)
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidPolicy, "", fmt.Errorf("%w: %w", ocipack.ErrInvalidPolicy, err))
	}
	return sv, nil
}

// checkBundle verifies one bundle: transparency evidence (keyless), signature and trust,
// identity, subject digest.
func (v *Verifier) checkBundle(sv *verify.Verifier, raw []byte, p Policy, digestHex string) (*verifiedBundle, reason) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, reasonUntrusted
	}
	if p.Keyless != nil {
		// Named before the signature check, which would only say "untrusted".
		if entries, err := b.TlogEntries(); v.keylessTlog > 0 && (err != nil || len(entries) == 0) {
			return nil, reasonMissingTlog
		}
		if ts, err := b.Timestamps(); v.keylessTSA > 0 && (err != nil || len(ts) == 0) {
			return nil, reasonMissingTimestamp
		}
	}
	if sv == nil {
		return nil, reasonUntrusted // no trusted material for this policy: no signature verifies
	}
	idOpt := verify.WithKey()
	if p.Keyless != nil {
		idOpt = verify.WithoutIdentitiesUnsafe() // matched below, one check at a time, to name the failure
	}
	res, err := sv.Verify(&b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), idOpt))
	if err != nil || res.Signature == nil {
		return nil, reasonUntrusted
	}
	out := &verifiedBundle{}
	if p.Keyless != nil {
		cert := res.Signature.Certificate
		if cert == nil {
			return nil, reasonUntrusted
		}
		im, err := verify.NewIssuerMatcher(p.Keyless.Issuer, "")
		if err != nil || im.Verify(*cert) != nil {
			return nil, reasonWrongIssuer
		}
		sm, err := verify.NewSANMatcher(p.Keyless.Subject, p.Keyless.SubjectRegExp)
		if err != nil || sm.Verify(*cert) != nil {
			return nil, reasonWrongIdentity
		}
		out.issuer, out.subject, out.keyless = cert.Issuer, cert.SubjectAlternativeName, true
		if cert.SourceRepositoryURI != "" || cert.SourceRepositoryRef != "" {
			out.certified = &sourceFacts{repository: cert.SourceRepositoryURI, ref: cert.SourceRepositoryRef, revision: cert.SourceRepositoryDigest}
		}
	} else if res.Signature.PublicKeyID != nil {
		out.keyID = string(*res.Signature.PublicKeyID)
	}
	st := res.Statement
	if st == nil {
		return nil, reasonWrongSubject // a message signature does not bind the pack digest
	}
	bound := false
	for _, s := range st.GetSubject() {
		if s.GetDigest()["sha256"] == digestHex {
			bound = true
		}
	}
	if !bound {
		return nil, reasonWrongSubject
	}
	out.predicateType = st.GetPredicateType()
	if pr := st.GetPredicate(); pr != nil {
		out.predicate, _ = protojson.Marshal(pr)
	}
	return out, reason{}
}

// slsaProvenance is the part of an SLSA provenance v1 predicate that policy reads.
type slsaProvenance struct {
	BuildDefinition struct {
		BuildType          string `json:"buildType"`
		ExternalParameters struct {
			Source *struct {
				Repository string `json:"repository"`
				Ref        string `json:"ref"`
			} `json:"source"`
			Workflow *struct {
				Repository string `json:"repository"`
				Ref        string `json:"ref"`
			} `json:"workflow"`
		} `json:"externalParameters"`
		ResolvedDependencies []struct {
			URI    string            `json:"uri"`
			Digest map[string]string `json:"digest"`
		} `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
	} `json:"runDetails"`
}

type sourceFacts struct{ builder, repository, ref, revision string }

// repoURL maps a repository URI to one comparable form: "git+https://host/org/repo" (SLSA and
// policy spelling) is "https://host/org/repo" (Fulcio's SourceRepositoryURI spelling). Nothing
// else is rewritten: no case folding, no ".git" or trailing-slash trimming.
func repoURL(s string) string {
	if rest, ok := strings.CutPrefix(s, "git+https://"); ok {
		return "https://" + rest
	}
	return s
}

// primarySource reads the predicate's primary source, the one the build was run from:
//   - externalParameters.workflow {repository, ref} (GitHub Actions build types), or
//   - externalParameters.source {repository, ref} (connector-mcp's pack-sign build type);
//   - when both are present they must name the same repository and ref (ambiguous_source).
//
// The revision is the gitCommit (or sha1) digest of the resolvedDependencies entries whose URI is
// exactly that repository "@" ref; entries naming other repositories are ignored, and two
// different revisions of the primary source are ambiguous_source. A predicate with no primary
// source is wrong_source_repository: a dependency that merely names the reviewed repository
// proves nothing.
func primarySource(p *slsaProvenance) (*sourceFacts, reason) {
	var src *sourceFacts
	if w := p.BuildDefinition.ExternalParameters.Workflow; w != nil && w.Repository != "" {
		src = &sourceFacts{repository: w.Repository, ref: w.Ref}
	}
	if s := p.BuildDefinition.ExternalParameters.Source; s != nil && s.Repository != "" {
		if src != nil && (repoURL(src.repository) != repoURL(s.Repository) || src.ref != s.Ref) {
			return nil, reasonAmbiguousSource
		}
		src = &sourceFacts{repository: s.Repository, ref: s.Ref}
	}
	if src == nil {
		return nil, reasonWrongRepository
	}
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		at := strings.LastIndex(d.URI, "@")
		if at <= 0 || repoURL(d.URI[:at]) != repoURL(src.repository) || d.URI[at+1:] != src.ref {
			continue
		}
		rev := d.Digest["gitCommit"]
		if rev == "" {
			rev = d.Digest["sha1"]
		}
		if rev == "" {
			continue
		}
		if src.revision != "" && src.revision != rev {
			return nil, reasonAmbiguousSource
		}
		src.revision = rev
	}
	src.builder = p.RunDetails.Builder.ID
	return src, reason{}
}

// checkSource is the merge verification of one verified SLSA provenance bundle: builder, the
// source the certificate certified (keyless), the predicate's primary source against it, then
// against the policy.
func (v *Verifier) checkSource(b verifiedBundle, pol *apiv1.ProvenancePolicy) (*sourceFacts, reason) {
	var p slsaProvenance
	// Exact-case members: encoding/json would merge "BuildDefinition" into buildDefinition,
	// so that this check and other readers of the same signed predicate saw different sources.
	if err := snapshot.Unmarshal(b.predicate, &p); err != nil {
		return nil, reasonWrongPredicate
	}
	if pol.BuilderID != "" && p.RunDetails.Builder.ID != pol.BuilderID {
		return nil, reasonWrongBuilder
	}
	cert := b.certified
	if cert == nil && b.keyless && v.strict {
		return nil, reasonMissingCertSource
	}
	if cert != nil {
		if repoURL(cert.repository) != repoURL(pol.SourceRepository) {
			return nil, reasonWrongCertRepository
		}
		if cert.ref != pol.SourceRef {
			return nil, reasonWrongCertRef
		}
	}
	src, why := primarySource(&p)
	if src == nil {
		return nil, why
	}
	if cert != nil {
		if repoURL(src.repository) != repoURL(cert.repository) || src.ref != cert.ref ||
			(cert.revision != "" && src.revision != "" && src.revision != cert.revision) {
			return nil, reasonPredicateDisagrees
		}
		if src.revision == "" {
			src.revision = cert.revision
		}
	}
	if repoURL(src.repository) != repoURL(pol.SourceRepository) {
		return nil, reasonWrongRepository
	}
	if src.ref != pol.SourceRef {
		return nil, reasonWrongRef
	}
	src.repository = pol.SourceRepository
	return src, reason{}
}
