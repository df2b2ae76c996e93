package activation

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

// stepErr is a step error as the adapters make it: a refusal name wrapping a cause.
type stepErr struct {
	name string
	err  error
}

func (e *stepErr) Error() string   { return "step " + e.name }
func (e *stepErr) Refusal() string { return e.name }
func (e *stepErr) Unwrap() error   { return e.err }

// Every rule of every ruleset is matched by the error made for it (and by no earlier rule), and
// an unknown error reaches the fallback. Twin: the fallback rows are asserted by the same table.
func TestClassifyEveryRule(t *testing.T) {
	ref := egress.CredentialRef{Name: "tok", Key: "token"}
	verifyPolicy := &ocipack.RefusalError{Name: "unanchored_subject_regexp", Err: ocipack.ErrUnanchoredSubjectRegExp}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	unknown := errors.New("something no rule names")
	cases := []struct {
		rs   *ruleset
		err  error
		what string
	}{
		{&bindingRules, &k8sbinding.CABundleError{Ref: k8sbinding.CABundleRef{Name: "ca", Key: "ca.crt"}, Name: k8sbinding.RefusalCABundleNotFound}, "k8sbinding.CABundleError (missing)"},
		{&bindingRules, &k8sbinding.CABundleError{Ref: k8sbinding.CABundleRef{Name: "ca", Key: "ca.crt"}, Name: "ca_bundle_invalid"}, "k8sbinding.CABundleError (unusable)"},
		{&bindingRules, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn}, "k8sbinding.CredentialRefusal (not opted in)"},
		{&bindingRules, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialHostNotAllowed}, "k8sbinding.CredentialRefusal"},
		{&bindingRules, &egress.CredentialError{Ref: ref, Reason: "key not found"}, "egress.CredentialError"},
		{&bindingRules, &k8sbinding.CeilingError{Entry: "10.0.0.0/8"}, "k8sbinding.CeilingError"},
		{&bindingRules, fmt.Errorf("%w: boom", k8sbinding.ErrClusterPolicyUnavailable), "k8sbinding.ErrClusterPolicyUnavailable"},
		{&bindingRules, fmt.Errorf("%w: no reader", egress.ErrInvalidPolicy), "egress.ErrInvalidPolicy"},
		{&bindingRules, unknown, "any other error"},

		{&freezeRules, &stepErr{StepBinding, &k8sbinding.CeilingError{Entry: "10.0.0.0/8"}}, StepBinding},
		{&freezeRules, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialHostNotAllowed}, "k8sbinding.ErrCredentialRefused, egress.ErrCredentialUnavailable"},
		{&freezeRules, &egress.TLSError{Name: egress.RefusalTLSUnknownAuthority}, "egress.ErrTLSRefused"},
		{&freezeRules, &mcpclient.TransportError{Op: "connect", Status: 403, Err: mcpclient.ErrInsufficientScope}, "mcpclient.ErrInsufficientScope"},
		{&freezeRules, &egress.DestinationError{Addr: "10.0.0.1:443", Reason: "private"}, "egress.ErrDestinationRefused"},
		{&freezeRules, fmt.Errorf("list: %w", context.DeadlineExceeded), "deadlines"},
		{&freezeRules, fmt.Errorf("%w: %w", mcpclient.ErrConnectionClosed, dial), "a failed dial"},
		{&freezeRules, fmt.Errorf("%w: 503", mcpclient.ErrHTTPStatus), "mcpclient.ErrConnectionClosed, mcpclient.ErrHTTPStatus"},
		{&freezeRules, &mcpclient.RefusalError{Name: "too_many_tools", Err: mcpclient.ErrTooManyTools}, "any named refusal"},
		{&freezeRules, unknown, "any other error"},

		{&sourceRules, &stepErr{StepPackReference, &ocipack.RefusalError{Name: "invalid_reference"}}, StepPackReference},
		{&sourceRules, &stepErr{StepTrustUnavailable, errors.New("list: forbidden")}, StepTrustUnavailable},
		{&sourceRules, &stepErr{StepNoTrustSource, errors.New("none")}, StepNoTrustSource},
		{&sourceRules, &stepErr{StepVerifyPolicy, verifyPolicy}, StepVerifyPolicy},
		{&sourceRules, &stepErr{StepPullSecretsDisabled, nil}, StepPullSecretsDisabled},
		{&sourceRules, &stepErr{StepPullSecretFormat, errors.New("json")}, StepPullSecretFormat},
		{&sourceRules, &stepErr{StepProfilePolicy, &ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}}, StepProfilePolicy},
		{&sourceRules, &stepErr{StepProfileDigest, errors.New("json")}, StepProfileDigest},
		{&sourceRules, &ocipack.RefusalError{Name: "untrusted_signature", Err: ocipack.ErrUntrustedSignature}, "ocipack.ErrUntrustedSignature, ErrWrongIdentity, ErrWrongIssuer"},
		{&sourceRules, &stepErr{StepPullSecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn}}, StepPullSecretRefused + " (not opted in)"},
		{&sourceRules, &stepErr{StepPullSecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialHostNotAllowed}}, StepPullSecretRefused},
		{&sourceRules, &stepErr{StepPublicKeySecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn}}, StepPublicKeySecretRefused + " (not opted in)"},
		{&sourceRules, &stepErr{StepPullSecretUnavailable, errors.New("timeout")}, StepPullSecretUnavailable},
		{&sourceRules, &stepErr{StepPullSecretNoKey, nil}, StepPullSecretNoKey},
		{&sourceRules, &stepErr{StepPublicKeySecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialServiceAccountToken}}, StepPublicKeySecretRefused},
		{&sourceRules, &stepErr{StepPublicKeySecretUnavailable, errors.New("timeout")}, StepPublicKeySecretUnavailable},
		{&sourceRules, &stepErr{StepPublicKeySecretNoKey, nil}, StepPublicKeySecretNoKey},
		{&sourceRules, unknown, "the pack's own errors"},

		{&packRules, &ociregistry.RegistryError{Op: "fetch", Err: errors.New("boom")}, "ociregistry.RegistryError"},
		{&packRules, &ociregistry.TrustedRootError{Cause: "timeout", Err: errors.New("boom")}, "ocipack.ErrTrustedRootUnavailable"},
		{&packRules, &ocipack.RefusalError{Name: "missing_signature", Err: ocipack.ErrNoSignature}, "ocipack.ErrNoSignature, ocipack.ErrNoAttestation"},
		{&packRules, &ocipack.RefusalError{Name: "wrong_identity", Err: ocipack.ErrWrongIdentity}, "ocipack verification sentinels"},
		{&packRules, &ocipack.RefusalError{Name: "blob_digest_mismatch", Err: ocipack.ErrBlobDigestMismatch}, "any named refusal"},
		{&packRules, unknown, "any other error"},
	}
	covered := map[*ruleset]map[string]bool{}
	for _, tc := range cases {
		got := tc.rs.find(tc.err)
		if got.what != tc.what {
			t.Errorf("%s: %v matched %q, want %q", tc.rs.name, tc.err, got.what, tc.what)
		}
		if covered[tc.rs] == nil {
			covered[tc.rs] = map[string]bool{}
		}
		covered[tc.rs][got.what] = true
		serr := classifyWith(v1.ConditionSnapshotFrozen, tc.rs, tc.err, &classifyContext{where: "https://mcp.example.com/mcp"})
		if serr == nil || serr.Reason() == "" || serr.Message() == "" || !errors.Is(serr, tc.err) {
			t.Errorf("%s %q: outcome %+v", tc.rs.name, tc.what, serr)
		}
	}
	for _, rs := range []*ruleset{&bindingRules, &freezeRules, &sourceRules, &packRules} {
		for _, r := range append(rs.rules, rs.fallback) {
			if !covered[rs][r.what] {
				t.Errorf("ruleset %s: rule %q has no case", rs.name, r.what)
			}
		}
	}
}

// A keyless trusted root that could not be fetched over TUF is no verdict on the pack: it is
// retried (TrustedRootUnavailable), under the cluster trust and under the profile's own policy
// alike, and its message names the refusal and the cause class, never the repository's URL, its
// credentials or what it answered. Twin: a signature refusal of the same pack is not retried.
func TestClassifyTrustedRootUnavailable(t *testing.T) {
	inner := fmt.Errorf("failed to download https://mirror:s3cret@tuf.example/2.root.json?token=abc: %w", errors.New("<html>maintenance</html>"))
	tre := &ociregistry.TrustedRootError{Cause: ociregistry.TrustedRootCauseHTTPStatus, Status: 503, Err: inner}
	for _, err := range []error{tre, fmt.Errorf("verify: %w", tre), &stepErr{StepProfilePolicy, tre}} {
		serr := ClassifyVerifyError(VerifyRequest{Ref: "r@sha256:x"}, err)
		msg := serr.Message()
		if serr.Reason() != v1.ReasonTrustedRootUnavailable || !serr.Transient() || serr.Waiting() || serr.Condition() != v1.ConditionSourceVerified {
			t.Errorf("%v: %s transient=%v waiting=%v", err, serr.Reason(), serr.Transient(), serr.Waiting())
		}
		if !strings.Contains(msg, ocipack.RefusalTrustedRootUnavailable+": http_status 503") {
			t.Errorf("message %q does not name the refusal and its cause", msg)
		}
		for _, leak := range []string{"tuf.example", "s3cret", "token", "maintenance", "root.json"} {
			if strings.Contains(msg, leak) || strings.Contains(tre.Error(), leak) {
				t.Errorf("message %q or error %q carries %q", msg, tre.Error(), leak)
			}
		}
		if !errors.Is(serr, ocipack.ErrTrustedRootUnavailable) {
			t.Errorf("%v: the sentinel is lost", err)
		}
	}
	twin := ClassifyVerifyError(VerifyRequest{}, &ocipack.RefusalError{Name: "missing_signature", Err: ocipack.ErrNoSignature})
	if twin.Transient() || twin.Reason() == v1.ReasonTrustedRootUnavailable {
		t.Errorf("a missing signature classified as %s (transient %v)", twin.Reason(), twin.Transient())
	}
}

// A StageError passes classify unchanged; nil classifies to nil.
func TestClassifyPassesDecisions(t *testing.T) {
	decided := NoCredentialHashKey.New("decided")
	if got := ClassifyFreezeError(FreezeRequest{URL: "https://h/mcp"}, fmt.Errorf("wrapped: %w", decided)); got != decided {
		t.Fatalf("got %+v", got)
	}
	if got := ClassifyVerifyError(VerifyRequest{}, nil); got != nil {
		t.Fatalf("nil classified to %+v", got)
	}
}

// The verifier's steps name the tenant's own references from the request, never a Secret's
// data; the profile-policy step keeps the inner outcome's reason and retry (twin: a transient
// inner failure keeps its own message). What another object of the same apply can remove waits
// (no trust source, a signer no trust source names, a key Secret not yet present); the twins
// with the same sentinels under the profile's own policy, or a Secret that exists but is
// refused, do not.
func TestClassifyVerifySteps(t *testing.T) {
	notOptedIn := &k8sbinding.CredentialRefusal{Ref: egress.CredentialRef{Name: "team-key", Key: "cosign.pub"}, Name: k8sbinding.RefusalCredentialNotOptedIn}
	for _, c := range []struct {
		err     error
		reason  string
		waiting bool
	}{
		{&stepErr{StepNoTrustSource, errors.New("none")}, v1.ReasonUntrustedSigner, true},
		{&ocipack.RefusalError{Name: "untrusted_signature", Err: ocipack.ErrUntrustedSignature}, v1.ReasonVerificationFailed, true},
		{&ocipack.RefusalError{Name: "wrong_identity", Err: ocipack.ErrWrongIdentity}, v1.ReasonVerificationFailed, true},
		{&stepErr{StepPublicKeySecretRefused, notOptedIn}, v1.ReasonCredentialNotFound, true},
		{&stepErr{StepPullSecretRefused, notOptedIn}, v1.ReasonCredentialNotFound, true},
		{&stepErr{StepProfilePolicy, &ocipack.RefusalError{Name: "untrusted_signature", Err: ocipack.ErrUntrustedSignature}}, v1.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}, v1.ReasonVerificationFailed, false},
		{&stepErr{StepPublicKeySecretRefused, &k8sbinding.CredentialRefusal{Name: k8sbinding.RefusalCredentialServiceAccountToken}}, v1.ReasonCredentialRefused, false},
		{&ocipack.RefusalError{Name: "blob_digest_mismatch", Err: ocipack.ErrBlobDigestMismatch}, v1.ReasonPackInvalid, false},
	} {
		serr := ClassifyVerifyError(VerifyRequest{}, c.err)
		if serr.Reason() != c.reason || serr.Waiting() != c.waiting || serr.Transient() {
			t.Errorf("%v: got %s waiting=%v transient=%v, want %s waiting=%v", c.err, serr.Reason(), serr.Waiting(), serr.Transient(), c.reason, c.waiting)
		}
	}

	req := VerifyRequest{Namespace: "team-a", PullSecret: &v1.LocalObjectReference{Name: "regcred"},
		Policy: &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: "team-key", Key: "cosign.pub"}}}
	ref := egress.CredentialRef{Name: "regcred", Key: ".dockerconfigjson"}
	for _, c := range []struct {
		err       error
		reason    string
		transient bool
		msg       string
	}{
		{&stepErr{StepPullSecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialHostNotAllowed}}, v1.ReasonCredentialRefused, false,
			`pull Secret "regcred" is refused (credential_host_not_allowed)`},
		{&stepErr{StepPublicKeySecretNoKey, nil}, v1.ReasonVerificationFailed, false, `public-key Secret "team-key" has no key "cosign.pub"`},
		{&stepErr{StepPublicKeySecretUnavailable, errors.New("etcd timeout")}, v1.ReasonRegistryUnavailable, true, `public-key Secret "team-key" could not be read`},
		{&stepErr{StepPullSecretFormat, errors.New("invalid character")}, v1.ReasonVerificationFailed, false, `pull secret "regcred" is not a docker config`},
		{&stepErr{StepNoTrustSource, errors.New("none")}, v1.ReasonUntrustedSigner, false, "refused (no_trust_source)"},
		{&stepErr{StepPublicKeySecretRefused, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn}}, v1.ReasonCredentialNotFound, false,
			`public-key Secret "team-key" (credential_not_opted_in): no Secret of that name labelled connectors.b10x.io/credential=true in this namespace`},
		{&stepErr{StepProfilePolicy, &ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}}, v1.ReasonVerificationFailed, false,
			"not the profile's own verify policy (profile_policy/wrong_source_ref)"},
		{&stepErr{StepProfilePolicy, &ociregistry.RegistryError{Op: "fetch", Err: errors.New("boom")}}, v1.ReasonRegistryUnavailable, true,
			"the registry could not serve the pack (fetch); retrying"},
		{&stepErr{StepVerifyPolicy, &ocipack.RefusalError{Name: "unanchored_subject_regexp", Path: "keyless.subjectRegExp"}}, v1.ReasonVerificationFailed, false,
			"the profile's verify policy is refused: unanchored_subject_regexp at keyless.subjectRegExp"},
	} {
		serr := ClassifyVerifyError(req, c.err)
		if serr.Condition() != v1.ConditionSourceVerified || serr.Reason() != c.reason || serr.Transient() != c.transient || !strings.Contains(serr.Message(), c.msg) {
			t.Errorf("%v: got %s transient=%v %q, want %s %q", c.err, serr.Reason(), serr.Transient(), serr.Message(), c.reason, c.msg)
		}
		if strings.Contains(serr.Message(), "etcd") || strings.Contains(serr.Message(), "invalid character") {
			t.Errorf("%v: the message carries the cause's text: %q", c.err, serr.Message())
		}
	}
}

// The freeze and pack cases below moved here from the adapters package with the classification
// (the adapters return the libraries' own errors).

func TestClassifyFreezeErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		reason    string
		transient bool
	}{
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), v1.ReasonServerUnreachable, true},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), v1.ReasonServerUnreachable, true},
		{"probe timeout", &mcpclient.RefusalError{Name: "probe_timeout", Err: mcpclient.ErrProbeTimeout}, v1.ReasonServerUnreachable, true},
		{"http status", fmt.Errorf("%w: 503", mcpclient.ErrHTTPStatus), v1.ReasonServerUnreachable, true},
		{"unresolvable host", &egress.DestinationError{Addr: "mcp.example:443", Reason: "resolve"}, v1.ReasonServerUnreachable, true},
		{"credential missing", &egress.CredentialError{Ref: egress.CredentialRef{Name: "s", Key: "k"}, Reason: "secret not found"}, v1.ReasonCredentialNotFound, true},
		// A destination refused at dial time reads like a closed port (no scanner oracle).
		{"metadata address at dial time", fmt.Errorf("post: %w", &egress.DestinationError{Addr: "169.254.169.254:80", Reason: "metadata"}), v1.ReasonServerUnreachable, true},
		{"credential not opted in", &k8sbinding.CredentialRefusal{Name: k8sbinding.RefusalCredentialNotOptedIn}, v1.ReasonCredentialNotFound, true},
		{"credential for another host", fmt.Errorf("x: %w", &k8sbinding.CredentialRefusal{Name: k8sbinding.RefusalCredentialHostNotAllowed}), v1.ReasonCredentialRefused, false},
		{"too many tools", &mcpclient.RefusalError{Name: "too_many_tools", Err: mcpclient.ErrTooManyTools}, v1.ReasonFreezeRefused, false},
		{"roots requested", &mcpclient.FeatureRefusedError{Feature: "roots"}, v1.ReasonFreezeRefused, false},
		// A certificate that does not verify needs a human (a CA bundle, or an impostor).
		{"private CA without its bundle", fmt.Errorf("connect: %w", &egress.TLSError{Name: egress.RefusalTLSUnknownAuthority}), v1.ReasonFreezeRefused, false},
		{"certificate for another host", &egress.TLSError{Name: egress.RefusalTLSHostnameMismatch}, v1.ReasonFreezeRefused, false},
		// Step-up needs a human: the credential lacks a scope.
		{"insufficient scope", &mcpclient.TransportError{Op: "connect", Status: 403, Err: mcpclient.ErrInsufficientScope, Scopes: []string{"repo:write"}}, v1.ReasonFreezeRefused, false},
		{"plain 403", &mcpclient.TransportError{Op: "connect", Status: 403, Err: mcpclient.ErrHTTPStatus}, v1.ReasonServerUnreachable, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serr := ClassifyFreezeError(FreezeRequest{URL: "https://mcp.example.com/mcp"}, tc.err)
			if serr == nil {
				t.Fatal("not a StageError")
			}
			if serr.Reason() != tc.reason || serr.Transient() != tc.transient || serr.Condition() != v1.ConditionSnapshotFrozen {
				t.Fatalf("got %s transient=%v", serr.Reason(), serr.Transient())
			}
			if strings.Contains(serr.Message(), "127.0.0.1:1") || strings.Contains(serr.Message(), "connection refused") {
				t.Fatalf("message carries a raw transport error: %q", serr.Message())
			}
			if tc.name == "insufficient scope" && !strings.Contains(serr.Message(), "requires scope repo:write") {
				t.Fatalf("the step-up message does not name the scope: %q", serr.Message())
			}
		})
	}
}

func TestClassifyPackErrors(t *testing.T) {
	cases := []struct {
		err       error
		reason    string
		transient bool
	}{
		{&ocipack.RefusalError{Name: "missing_signature", Err: ocipack.ErrNoSignature}, v1.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "missing_attestation", Err: ocipack.ErrNoAttestation}, v1.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}, v1.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "wrong_identity", Err: ocipack.ErrWrongIdentity}, v1.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "blob_digest_mismatch", Err: ocipack.ErrBlobDigestMismatch}, v1.ReasonPackInvalid, false},
		{&ocipack.RefusalError{Name: "unreviewed", Path: "operations[0].effect", Err: ocipack.ErrUnreviewedEffect}, v1.ReasonPackInvalid, false},
		{&ociregistry.RegistryError{Op: "fetch", Err: errors.New("boom")}, v1.ReasonRegistryUnavailable, true},
		{errors.New("something else"), v1.ReasonRegistryUnavailable, true},
	}
	for _, tc := range cases {
		serr := classifyPack(tc.err)
		if serr == nil || serr.Reason() != tc.reason || serr.Transient() != tc.transient || serr.Condition() != v1.ConditionSourceVerified {
			t.Errorf("%v: got %+v, want %s", tc.err, serr, tc.reason)
		}
	}
	// A registry behind a CA the manager does not trust: retried, and the TLS refusal is named
	// (twin: a plain registry failure names none).
	tlsErr := &ociregistry.RegistryError{Op: "fetch", Err: fmt.Errorf("get: %w", &egress.TLSError{Name: egress.RefusalTLSUnknownAuthority})}
	if serr := classifyPack(tlsErr); serr == nil || !strings.Contains(serr.Message(), egress.RefusalTLSUnknownAuthority) {
		t.Errorf("registry TLS refusal: %+v", serr)
	}
	if serr := classifyPack(&ociregistry.RegistryError{Op: "fetch", Err: errors.New("boom")}); serr == nil || strings.Contains(serr.Message(), "tls_") {
		t.Errorf("plain registry failure: %+v", serr)
	}
}

// classifyPack classifies an ocipack error of a verification or pull as SourceVerified.
func classifyPack(err error) *StageError {
	return ClassifyVerifyError(VerifyRequest{}, err)
}
