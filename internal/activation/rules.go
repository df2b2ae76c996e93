package activation

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
)

// ruleset turns the errors of one step (binding, live freeze, pack verification) into stage
// outcomes: the first rule that matches wins, else the fallback.
type ruleset struct {
	// name labels the ruleset in tests and docs.
	name     string
	rules    []rule
	fallback rule
}

// rule maps one kind of error, matched by a library sentinel (errors.Is), a library type
// (errors.As) or a refusal name (refusal.Name), onto a reason.
type rule struct {
	// what names the errors matched, for tests and docs.
	what  string
	match func(err error) bool
	// reason, transient and waiting are the outcome (StageError's); ignored when delegate is
	// set.
	reason    string
	transient bool
	waiting   bool
	// message renders the safe condition message: refusal names, the tenant's own references
	// and the sanitized endpoint, never a value, server prose or another namespace.
	message func(err error, c *classifyContext) string
	// delegate, when set, classifies the error (its cause, when unwrap is set) with another
	// ruleset; a non-nil message then replaces the message of a non-transient outcome.
	delegate *ruleset
	unwrap   bool
}

// classifyContext is what the classification knows of the request that failed: names the tenant
// wrote itself, safe to repeat.
type classifyContext struct {
	// where is the sanitized endpoint URL (freeze).
	where string
	// verify is the pack verification request (SourceVerified).
	verify *VerifyRequest
}

// classify turns err into the outcome of cl's stage under its ruleset. A *StageError (an outcome a
// stage decided itself) passes unchanged.
func classify(cl classifier, err error, c *classifyContext) *StageError {
	return classifyWith(cl.condition, cl.rules, err, c)
}

// classifyWith is classify under rs, a classifier's ruleset or one it delegates to.
func classifyWith(cond string, rs *ruleset, err error, c *classifyContext) *StageError {
	if err == nil {
		return nil
	}
	var serr *StageError
	if errors.As(err, &serr) {
		return serr
	}
	if c == nil {
		c = &classifyContext{}
	}
	r := rs.find(err)
	if r.delegate != nil {
		inner := err
		if r.unwrap {
			if u := errors.Unwrap(err); u != nil {
				inner = u
			}
		}
		out := classifyWith(cond, r.delegate, inner, c)
		out.err = err
		if r.message != nil && !out.Transient() {
			out.message = r.message(err, c)
		}
		return out
	}
	o := Outcome{condition: cond, reason: r.reason, transient: r.transient, waiting: r.waiting}
	return o.Wrap(err, "%s", r.message(err, c))
}

// find returns the first rule of rs matching err, or the fallback.
func (rs *ruleset) find(err error) rule {
	for _, r := range rs.rules {
		if r.match(err) {
			return r
		}
	}
	return rs.fallback
}

// ClassifyVerifyError turns an error of SourceVerifier.VerifyPack for req into the
// SourceVerified outcome, with the reason, message and retry of the activation table (nil for
// nil).
func ClassifyVerifyError(req VerifyRequest, err error) *StageError {
	return classify(sourceClassifier, err, &classifyContext{verify: &req})
}

// ClassifyFreezeError turns an error of Freezer.Freeze for req into the SnapshotFrozen outcome,
// with the reason, message and retry of the activation table (nil for nil).
func ClassifyFreezeError(req FreezeRequest, err error) *StageError {
	return classify(freezeClassifier, err, &classifyContext{where: SanitizeURL(req.URL)})
}

// ClassifyBindingError maps a refusal of the endpoint binding (internal/k8sbinding: credential
// opt-in, egress ceiling, cluster policy; egress: literal address, invalid policy) onto a Bound
// outcome (nil for nil). It is used before anything is dialed; its messages name refusals and the
// tenant's own references, never values, ceilings or other namespaces.
func ClassifyBindingError(err error) *StageError {
	return classify(bindingClassifier, err, nil)
}

// ClassifyCredentialError maps a refusal of the credential read before a freeze (the binding's
// refusals: a Secret missing or not opted in) onto a SnapshotFrozen outcome (nil for nil).
func ClassifyCredentialError(err error) *StageError {
	return classify(credentialClassifier, err, nil)
}

// is matches any of the sentinels.
func is(sentinels ...error) func(error) bool {
	return func(err error) bool {
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return true
			}
		}
		return false
	}
}

// named matches the refusal name (refusal.Has).
func named(name string) func(error) bool {
	return func(err error) bool { return refusal.Has(err, name) }
}

// text is a constant message.
func text(msg string) func(error, *classifyContext) string {
	return func(error, *classifyContext) string { return msg }
}

// bindingRules classify the endpoint binding's refusals (Bound, and SnapshotFrozen for the
// credential read).
var bindingRules = ruleset{
	name: "binding",
	rules: []rule{
		{what: "k8sbinding.CABundleError (missing)", transient: true, reason: v1.ReasonCABundleNotFound,
			match: func(err error) bool {
				var cab *k8sbinding.CABundleError
				return errors.As(err, &cab) && cab.Transient()
			},
			message: func(err error, _ *classifyContext) string {
				var cab *k8sbinding.CABundleError
				errors.As(err, &cab)
				return fmt.Sprintf("%s: no ConfigMap %q with key %q labelled %s=true in this namespace (spec.mcpConnection.caBundleRef)", cab.Name, clip(cab.Ref.Name), clip(cab.Ref.Key), v1.CABundleLabel)
			}},
		{what: "k8sbinding.CABundleError (unusable)", reason: v1.ReasonEndpointRefused,
			match: func(err error) bool {
				var cab *k8sbinding.CABundleError
				return errors.As(err, &cab)
			},
			message: func(err error, _ *classifyContext) string {
				var cab *k8sbinding.CABundleError
				errors.As(err, &cab)
				return fmt.Sprintf("%s: ConfigMap %q key %q holds no usable PEM CA certificates (spec.mcpConnection.caBundleRef)", cab.Name, clip(cab.Ref.Name), clip(cab.Ref.Key))
			}},
		{what: "k8sbinding.CredentialRefusal (not opted in)", transient: true, reason: v1.ReasonCredentialNotFound,
			match: func(err error) bool {
				var cred *k8sbinding.CredentialRefusal
				return errors.As(err, &cred) && cred.Transient()
			},
			message: func(err error, _ *classifyContext) string {
				var cred *k8sbinding.CredentialRefusal
				errors.As(err, &cred)
				if cred.Name == k8sbinding.RefusalCredentialConsentMissing {
					return fmt.Sprintf("%s: Secret %q may not be read: this namespace has not consented (a RoleBinding of the credentials ClusterRole to the operator's ServiceAccount, docs/security.md)", cred.Name, clip(cred.Ref.Name))
				}
				return fmt.Sprintf("%s: no Secret %q labelled %s=true in this namespace", cred.Name, clip(cred.Ref.Name), v1.CredentialLabel)
			}},
		{what: "k8sbinding.CredentialRefusal", reason: v1.ReasonCredentialRefused,
			match: func(err error) bool {
				var cred *k8sbinding.CredentialRefusal
				return errors.As(err, &cred)
			},
			message: func(err error, _ *classifyContext) string {
				var cred *k8sbinding.CredentialRefusal
				errors.As(err, &cred)
				return fmt.Sprintf("%s: Secret %q may not be sent to this endpoint", cred.Name, clip(cred.Ref.Name))
			}},
		{what: "egress.CredentialError", transient: true, reason: v1.ReasonCredentialNotFound,
			match: func(err error) bool {
				var ce *egress.CredentialError
				return errors.As(err, &ce)
			},
			message: func(err error, _ *classifyContext) string {
				var ce *egress.CredentialError
				errors.As(err, &ce)
				return fmt.Sprintf("credential Secret %q: %s", clip(ce.Ref.Name), ce.Reason)
			}},
		{what: "k8sbinding.CeilingError", reason: v1.ReasonEndpointRefused,
			match: func(err error) bool {
				var ceil *k8sbinding.CeilingError
				return errors.As(err, &ceil)
			},
			message: func(err error, _ *classifyContext) string {
				var ceil *k8sbinding.CeilingError
				errors.As(err, &ceil)
				return fmt.Sprintf("%s: mcpConnection.egress.allowCIDRs entry %q is beyond the ranges the cluster allows this namespace", k8sbinding.RefusalEgressCeiling, clip(ceil.Entry))
			}},
		{what: "k8sbinding.ErrClusterPolicyUnavailable", transient: true, reason: v1.ReasonProgressing,
			match:   is(k8sbinding.ErrClusterPolicyUnavailable),
			message: text("the cluster egress policy could not be read; retrying")},
		{what: "egress.ErrInvalidPolicy", reason: v1.ReasonEndpointRefused,
			match:   is(egress.ErrInvalidPolicy),
			message: text("the endpoint binding is not a valid egress policy (check mcpConnection.egress.allowCIDRs)")},
	},
	fallback: rule{what: "any other error", reason: v1.ReasonEndpointRefused,
		message: func(err error, _ *classifyContext) string {
			return "the endpoint is not acceptable to the egress policy: " + RefusalText(err, "refused")
		}},
}

// Refusal names a Freezer or a SourceVerifier gives the steps of its own that no library names
// (the implementation wraps the step's cause in an error whose refusal name is the step). The
// stage table classifies them; the cause is kept for errors.Is and logs.
const (
	// StepBinding: building the endpoint binding of a freeze failed (classified as a binding
	// refusal); nothing was dialed.
	StepBinding = "freeze_binding"
	// StepPackReference: the pack reference is not REPOSITORY@sha256:<hex>.
	StepPackReference = "pack_reference_refused"
	// StepTrustUnavailable: the cluster's trust policies could not be read (retried).
	StepTrustUnavailable = "trust_unavailable"
	// StepNoTrustSource: no trust source applies to the profile's namespace.
	StepNoTrustSource = "no_trust_source"
	// StepVerifyPolicy: the profile's own spec.source.oci.verify is invalid.
	StepVerifyPolicy = "verify_policy_refused"
	// StepPullSecretsDisabled: the profile names a pull secret and this manager takes none.
	StepPullSecretsDisabled = "pull_secrets_disabled"
	// StepPullSecretFormat: the pull secret is not a docker config.
	StepPullSecretFormat = "pull_secret_not_docker_config"
	// StepPullSecretRefused: the pull secret does not opt in (the cause is a
	// k8sbinding.CredentialRefusal).
	StepPullSecretRefused = "pull_secret_refused" //nolint:gosec // a refusal name, not a credential
	// StepPublicKeySecretRefused: the profile's public-key Secret does not opt in (the cause is a
	// k8sbinding.CredentialRefusal).
	StepPublicKeySecretRefused = "public_key_secret_refused" //nolint:gosec // a refusal name, not a credential
	// StepPullSecretUnavailable: the pull secret could not be read (retried).
	StepPullSecretUnavailable = "pull_secret_unavailable"
	// StepPublicKeySecretUnavailable: the public-key Secret could not be read (retried).
	StepPublicKeySecretUnavailable = "public_key_secret_unavailable" //nolint:gosec // a refusal name, not a credential
	// StepPullSecretNoKey: the pull secret has no .dockerconfigjson key.
	StepPullSecretNoKey = "pull_secret_no_key"
	// StepPublicKeySecretNoKey: the public-key Secret lacks the key the profile names.
	StepPublicKeySecretNoKey = "public_key_secret_no_key" //nolint:gosec // a refusal name, not a credential
	// StepProfilePolicy: the pack satisfies a trust source but not the profile's own verify
	// policy; the cause is the ocipack verification error.
	StepProfilePolicy = "profile_policy"
	// StepProfileDigest: the pulled profile document does not encode canonically.
	StepProfileDigest = "profile_not_encodable"
)

// freezeRules classify the errors of a live freeze: named refusals of egress, mcpclient and
// snapshot need a human (FreezeRefused); a missing credential and transport failures are
// retried; every failure to open a connection reads the same (status is no port scanner).
var freezeRules = ruleset{
	name: "freeze",
	rules: []rule{
		{what: StepBinding, match: named(StepBinding), delegate: &bindingRules, unwrap: true},
		{what: "k8sbinding.ErrCredentialRefused, egress.ErrCredentialUnavailable",
			match: is(k8sbinding.ErrCredentialRefused, egress.ErrCredentialUnavailable), delegate: &bindingRules},
		// The server's certificate failed verification: a private CA whose bundle is not
		// configured (spec.mcpConnection.caBundleRef), or an impostor. A human must act.
		{what: "egress.ErrTLSRefused", reason: v1.ReasonFreezeRefused, match: is(egress.ErrTLSRefused),
			message: func(err error, c *classifyContext) string {
				return fmt.Sprintf("the TLS certificate of %s was refused: %s (name the endpoint's CA bundle in spec.mcpConnection.caBundleRef)", c.where, refusalText(err))
			}},
		// Step-up: the credential lacks a scope. The message names what the server asked for, so
		// a human can log in again with it; the cluster never escalates a scope by itself.
		{what: "mcpclient.ErrInsufficientScope", reason: v1.ReasonFreezeRefused, match: is(mcpclient.ErrInsufficientScope),
			message: func(err error, c *classifyContext) string {
				asked := "a scope it did not name"
				var te *mcpclient.TransportError
				if errors.As(err, &te) && len(te.Scopes) > 0 {
					asked = "scope " + strings.Join(te.Scopes, " ")
				}
				return fmt.Sprintf("%s requires %s that the credential lacks (%s): log in again with it (mcpctl login --to-secret ... --scope ...); the cluster never escalates scopes", c.where, asked, mcpclient.RefusalInsufficientScope)
			}},
		// A destination refused at dial time (a name resolving into a denied or unallowed range,
		// or not resolving) reads exactly like a closed port: status is no port scanner.
		{what: "egress.ErrDestinationRefused", reason: v1.ReasonServerUnreachable, transient: true,
			match: is(egress.ErrDestinationRefused), message: unreachable},
		{what: "deadlines", reason: v1.ReasonServerUnreachable, transient: true,
			match:   is(context.DeadlineExceeded, egress.ErrDeadlineExceeded, mcpclient.ErrCallTimeout, mcpclient.ErrProbeTimeout),
			message: noAnswer},
		{what: "a failed dial", reason: v1.ReasonServerUnreachable, transient: true,
			match: func(err error) bool {
				return is(mcpclient.ErrConnectionClosed, mcpclient.ErrHTTPStatus)(err) && isDialFailure(err)
			},
			message: unreachable},
		{what: "mcpclient.ErrConnectionClosed, mcpclient.ErrHTTPStatus", reason: v1.ReasonServerUnreachable, transient: true,
			match: is(mcpclient.ErrConnectionClosed, mcpclient.ErrHTTPStatus), message: noAnswer},
		{what: "any named refusal", reason: v1.ReasonFreezeRefused,
			match: func(err error) bool { _, ok := refusal.As(err); return ok },
			message: func(err error, c *classifyContext) string {
				return fmt.Sprintf("the live tool listing of %s was refused: %s", c.where, refusalText(err))
			}},
	},
	fallback: rule{what: "any other error", reason: v1.ReasonServerUnreachable, transient: true, message: unreachable},
}

// unreachable is the one message of every failure to open a connection: refused by the IP
// policy, not resolving, closed, filtered or absent.
func unreachable(_ error, c *classifyContext) string {
	return fmt.Sprintf("%s could not be reached; retrying", c.where)
}

func noAnswer(err error, c *classifyContext) string {
	return fmt.Sprintf("%s did not answer the tool listing (%s); retrying", c.where, refusalText(err))
}

// isDialFailure reports whether err records a failed connection attempt (no byte exchanged).
func isDialFailure(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refusalText returns the stable refusal name of err (with the document path for ocipack
// refusals), or a word for the transport failures that carry none.
func refusalText(err error) string {
	switch {
	case RefusalText(err, "") != "":
		return RefusalText(err, "")
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, mcpclient.ErrConnectionClosed):
		return "connection_closed"
	case errors.Is(err, mcpclient.ErrHTTPStatus):
		return "http_status"
	}
	return "error"
}

// causeText is refusalText of the cause of a step error.
func causeText(err error) string {
	if u := errors.Unwrap(err); u != nil {
		return refusalText(u)
	}
	return refusalText(err)
}

// secretUse describes one kind of Secret the pack verifier reads, for the messages of its steps.
type secretUse struct {
	kind                        string
	refused, unavailable, nokey string
	// ref returns the Secret's name and key from the request.
	ref func(*VerifyRequest) (name, key string)
}

var secretUses = []secretUse{
	{kind: "pull", refused: StepPullSecretRefused, unavailable: StepPullSecretUnavailable, nokey: StepPullSecretNoKey,
		ref: func(r *VerifyRequest) (string, string) {
			if r == nil || r.PullSecret == nil {
				return "", corev1.DockerConfigJsonKey
			}
			return r.PullSecret.Name, corev1.DockerConfigJsonKey
		}},
	{kind: "public-key", refused: StepPublicKeySecretRefused, unavailable: StepPublicKeySecretUnavailable, nokey: StepPublicKeySecretNoKey,
		ref: func(r *VerifyRequest) (string, string) {
			if r == nil || r.Policy == nil || r.Policy.PublicKey == nil {
				return "", ""
			}
			return r.Policy.PublicKey.Name, r.Policy.PublicKey.Key
		}},
}

// notOptedIn matches a step named name whose cause is a Secret that does not exist or is not
// labelled yet (k8sbinding.RefusalCredentialNotOptedIn).
func notOptedIn(name string) func(error) bool {
	return func(err error) bool {
		var r *k8sbinding.CredentialRefusal
		return refusal.Has(err, name) && errors.As(err, &r) && r.Name == k8sbinding.RefusalCredentialNotOptedIn
	}
}

// secretRules are the rules of the Secrets the pack verifier reads.
func secretRules() []rule {
	var out []rule
	for _, u := range secretUses {
		out = append(out,
			// The Secret may be created, or labelled, in the same apply.
			rule{what: u.refused + " (not opted in)", match: notOptedIn(u.refused), reason: v1.ReasonCredentialNotFound, waiting: true,
				message: func(_ error, c *classifyContext) string {
					name, _ := u.ref(c.verify)
					return fmt.Sprintf("%s Secret %q (%s): no Secret of that name labelled %s=true in this namespace",
						u.kind, name, k8sbinding.RefusalCredentialNotOptedIn, v1.CredentialLabel)
				}},
			rule{what: u.refused, match: named(u.refused), reason: v1.ReasonCredentialRefused,
				message: func(err error, c *classifyContext) string {
					name, _ := u.ref(c.verify)
					refused := "refused"
					var r *k8sbinding.CredentialRefusal
					if errors.As(err, &r) {
						refused = r.Name
					}
					return fmt.Sprintf("%s Secret %q is refused (%s): it must be labelled %s=true, not be a ServiceAccount token, and (a pull secret) name the registry host in %s",
						u.kind, name, refused, v1.CredentialLabel, v1.CredentialAllowedHostsAnnotation)
				}},
			rule{what: u.unavailable, match: named(u.unavailable), reason: v1.ReasonRegistryUnavailable, transient: true,
				message: func(err error, c *classifyContext) string {
					name, _ := u.ref(c.verify)
					var r *k8sbinding.CredentialRefusal
					if errors.As(err, &r) && r.Name == k8sbinding.RefusalCredentialConsentMissing {
						return fmt.Sprintf("%s Secret %q may not be read (%s): this namespace has not consented (docs/security.md)", u.kind, name, r.Name)
					}
					return fmt.Sprintf("%s Secret %q could not be read", u.kind, name)
				}},
			rule{what: u.nokey, match: named(u.nokey), reason: v1.ReasonVerificationFailed,
				message: func(_ error, c *classifyContext) string {
					name, key := u.ref(c.verify)
					return fmt.Sprintf("%s Secret %q has no key %q", u.kind, name, key)
				}})
	}
	return out
}

// sourceRules classify the errors of a pack verification (SourceVerified): the verifier's own
// steps by refusal name, then the ocipack errors (packRules).
var sourceRules = ruleset{
	name: "source",
	rules: append([]rule{
		{what: StepPackReference, match: named(StepPackReference), reason: v1.ReasonPackInvalid,
			message: func(err error, _ *classifyContext) string {
				return "the pack reference is refused: " + causeText(err)
			}},
		{what: StepTrustUnavailable, match: named(StepTrustUnavailable), reason: v1.ReasonVerificationFailed, transient: true,
			message: text("the cluster trust policies could not be read; retrying")},
		// An McpTrustPolicy (or a namespace label it selects) may arrive in the same apply.
		{what: StepNoTrustSource, match: named(StepNoTrustSource), reason: v1.ReasonUntrustedSigner, waiting: true,
			message: text(fmt.Sprintf("refused (%s): no trust source with a signer and a provenance rule applies to this namespace; a cluster administrator grants one with an McpTrustPolicy", StepNoTrustSource))},
		{what: StepVerifyPolicy, match: named(StepVerifyPolicy), reason: v1.ReasonVerificationFailed,
			message: func(err error, _ *classifyContext) string {
				return "the profile's verify policy is refused: " + causeText(err)
			}},
		{what: StepPullSecretsDisabled, match: named(StepPullSecretsDisabled), reason: v1.ReasonVerificationFailed,
			message: text("pull secrets are not enabled on this manager")},
		{what: StepPullSecretFormat, match: named(StepPullSecretFormat), reason: v1.ReasonVerificationFailed,
			message: func(_ error, c *classifyContext) string {
				name, _ := secretUses[0].ref(c.verify)
				return fmt.Sprintf("pull secret %q is not a docker config", name)
			}},
		{what: StepProfilePolicy, match: named(StepProfilePolicy), delegate: &packRules, unwrap: true,
			message: func(err error, _ *classifyContext) string {
				return fmt.Sprintf("the pack satisfies the cluster trust but not the profile's own verify policy (%s/%s)", StepProfilePolicy, causeText(err))
			}},
		{what: StepProfileDigest, match: named(StepProfileDigest), reason: v1.ReasonPackInvalid,
			message: func(err error, _ *classifyContext) string {
				return "the profile document does not encode: " + causeText(err)
			}},
		// The pack is signed, but by a signer no trust source that applies names (yet): an
		// McpTrustPolicy naming it may arrive in the same apply. The profile's own policy is
		// matched above (StepProfilePolicy) and is refused at once.
		{what: "ocipack.ErrUntrustedSignature, ErrWrongIdentity, ErrWrongIssuer", reason: v1.ReasonVerificationFailed, waiting: true,
			match: is(ocipack.ErrUntrustedSignature, ocipack.ErrWrongIdentity, ocipack.ErrWrongIssuer),
			message: func(err error, _ *classifyContext) string {
				return "the pack's signer is named by no trust source that applies to this namespace: " + refusalText(err)
			}},
	}, secretRules()...),
	fallback: rule{what: "the pack's own errors", delegate: &packRules},
}

// registryFailure is a registry failure that is not a refusal (ociregistry.RegistryError),
// matched by its method so that the activation table, which the gateway links, does not link the
// registry client and sigstore.
type registryFailure interface {
	error
	RegistryOp() string
}

// trustedRootFailure is a failure to fetch the keyless trusted root
// (ociregistry.TrustedRootError), named by its cause class.
type trustedRootFailure interface {
	error
	TrustedRootCause() string
}

// packRules classify ocipack's errors of a pack verification and pull.
var packRules = ruleset{
	name: "pack",
	rules: []rule{
		{what: "ociregistry.RegistryError", reason: v1.ReasonRegistryUnavailable, transient: true,
			match: func(err error) bool {
				var reg registryFailure
				return errors.As(err, &reg)
			},
			message: func(err error, _ *classifyContext) string {
				var reg registryFailure
				errors.As(err, &reg)
				op := reg.RegistryOp()
				var te *egress.TLSError
				if errors.As(err, &te) {
					// Named, so the platform team knows to give the manager the registry's CA
					// (--ca-bundle-file); retried, as the registry may also be mid-rotation.
					op += ": " + te.Refusal()
				}
				return "the registry could not serve the pack (" + op + "); retrying"
			}},
		// Not a verdict on the pack: the keyless trusted root could not be fetched over TUF.
		{what: "ocipack.ErrTrustedRootUnavailable", reason: v1.ReasonTrustedRootUnavailable, transient: true,
			match: is(ocipack.ErrTrustedRootUnavailable),
			message: func(err error, _ *classifyContext) string {
				cause := "error"
				var tr trustedRootFailure
				if errors.As(err, &tr) {
					cause = clipN(tr.TrustedRootCause(), 64)
				}
				return fmt.Sprintf("the keyless trusted root could not be fetched over TUF (%s: %s); retrying", ocipack.RefusalTrustedRootUnavailable, cause)
			}},
		{what: "ocipack.ErrNoSignature, ocipack.ErrNoAttestation", reason: v1.ReasonProvenanceMissing,
			match: is(ocipack.ErrNoSignature, ocipack.ErrNoAttestation),
			message: func(err error, _ *classifyContext) string {
				return "the pack has no valid provenance: " + refusalText(err)
			}},
		{what: "ocipack verification sentinels", reason: v1.ReasonVerificationFailed,
			match: is(ocipack.ErrUntrustedSignature, ocipack.ErrWrongIdentity, ocipack.ErrWrongIssuer,
				ocipack.ErrWrongSubjectDigest, ocipack.ErrWrongPredicateType, ocipack.ErrWrongBuilder,
				ocipack.ErrWrongSourceRepository, ocipack.ErrWrongSourceRef, ocipack.ErrInvalidPolicy,
				ocipack.ErrInvalidKey, ocipack.ErrUnanchoredSubjectRegExp, ocipack.ErrAmbiguousSource,
				ocipack.ErrCertificateSource, ocipack.ErrPredicateDisagreesWithCertificate, ocipack.ErrMissingTransparency),
			message: func(err error, _ *classifyContext) string {
				return "the pack does not satisfy the provenance policy: " + refusalText(err)
			}},
		{what: "any named refusal", reason: v1.ReasonPackInvalid,
			match: func(err error) bool { _, ok := refusal.As(err); return ok },
			message: func(err error, _ *classifyContext) string {
				return "the pack is refused: " + refusalText(err)
			}},
	},
	fallback: rule{what: "any other error", reason: v1.ReasonRegistryUnavailable, transient: true,
		message: text("the pack could not be fetched; retrying")},
}
