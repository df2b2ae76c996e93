package activation

import (
	v1 "github.com/b10x/connector-mcp/api/v1"
)

// This file is the activation table: every stage of both pipelines, in the order the code runs
// it, with its condition, the outcomes the stages decide themselves, and the rulesets (rules.go)
// that turn a library's error into a stage outcome. docs/concepts.md shows the same table
// (TestConceptsTableMatchesCode). The Resolver runs the McpServiceProfile stages; the
// ServiceDeployment reconciler runs the deployment stages in DeploymentConditions' order.

// stage is one row of the activation table.
type stage struct {
	// condition is the stage condition type.
	condition string
	// decides lists the outcomes the stage decides itself (not from a library error).
	decides []Outcome
	// classifies lists the classifiers that turn library errors of this stage into outcomes.
	classifies []classifier
}

// classifier applies a ruleset (rules.go) at the stage of one condition: the outcome of a rule
// is (condition, the rule's reason and class).
type classifier struct {
	condition string
	rules     *ruleset
}

// decided and classifiers register every Outcome and classifier declared below, in declaration
// order, so that a test can hold each to its row (TestDeclaredOutcomesAreInTheirRows): an outcome
// or classifier no row lists would be a stage outcome the table (and docs/concepts.md) does not
// show.
var (
	decided     []Outcome
	classifiers []classifier
)

// declare registers o as decided by its stage.
func declare(o Outcome) Outcome {
	decided = append(decided, o)
	return o
}

// refused declares an outcome that needs a human: Stalled at once.
func refused(condition, reason string) Outcome {
	return declare(Outcome{condition: condition, reason: reason})
}

// waits declares an outcome another object can remove (StageError.Waiting).
func waits(condition, reason string) Outcome {
	return declare(Outcome{condition: condition, reason: reason, waiting: true})
}

// retried declares a transient outcome: Reconciling, retried.
func retried(condition, reason string) Outcome {
	return declare(Outcome{condition: condition, reason: reason, transient: true})
}

// classifies registers the classifier of rs at the stage of condition.
func classifies(condition string, rs *ruleset) classifier {
	c := classifier{condition: condition, rules: rs}
	classifiers = append(classifiers, c)
	return c
}

// The outcomes the McpServiceProfile stages decide themselves.
var (
	// InlineSourceRefused: an inline profile where the cluster requires packs.
	InlineSourceRefused = refused(v1.ConditionSourceVerified, v1.ReasonInlineSourceRefused)
	// NoPackVerifier: a pack profile and no pack verifier configured.
	NoPackVerifier = refused(v1.ConditionSourceVerified, v1.ReasonVerificationFailed)
	// ProfileInvalid: the profile document does not validate or encode.
	ProfileInvalid = refused(v1.ConditionSourceVerified, v1.ReasonProfileInvalid)
	// SnapshotDigestMismatch: the recorded snapshot does not reconstruct to its digest.
	SnapshotDigestMismatch = refused(v1.ConditionSnapshotReconstructed, v1.ReasonSnapshotDigestMismatch)
)

// The outcomes the ServiceDeployment stages decide themselves.
var (
	// ProfileNotFound: the referenced McpServiceProfile does not exist (yet).
	ProfileNotFound = retried(v1.ConditionProfileVerified, v1.ReasonProfileNotFound)
	// ProfileNotReady: the profile could not be read, is not verified yet, or is re-verified.
	ProfileNotReady = retried(v1.ConditionProfileVerified, v1.ReasonProfileNotReady)
	// ProfileWaiting: the profile's source waits for a trust source or Secret.
	ProfileWaiting = waits(v1.ConditionProfileVerified, v1.ReasonProfileNotReady)
	// ProfileRefused: the profile is Stalled, or its source is refused.
	ProfileRefused = refused(v1.ConditionProfileVerified, v1.ReasonProfileNotReady)

	// OperationSetMismatch: the bindings do not name exactly the profile's operations.
	OperationSetMismatch = refused(v1.ConditionBound, v1.ReasonOperationSetMismatch)
	// EndpointRefInvalid: a binding names another endpoint than the connection.
	EndpointRefInvalid = refused(v1.ConditionBound, v1.ReasonEndpointRefInvalid)
	// CredentialRefMismatch: a binding does not carry the connection's credentialRef.
	CredentialRefMismatch = refused(v1.ConditionBound, v1.ReasonCredentialRefMismatch)
	// GrantNotNamed: an operation names no grant.
	GrantNotNamed = refused(v1.ConditionBound, v1.ReasonGrantNotFound)
	// GrantNotFound: a grant RoleBinding or its role does not exist yet.
	GrantNotFound = waits(v1.ConditionBound, v1.ReasonGrantNotFound)
	// GrantDenied: a grant's role does not allow invoke on the deployment.
	GrantDenied = refused(v1.ConditionBound, v1.ReasonGrantDenied)
	// GrantUnreadable: a grant or its role could not be read.
	GrantUnreadable = retried(v1.ConditionBound, v1.ReasonProgressing)
	// EndpointRefused: the endpoint URL carries userinfo or a fragment, or is beyond policy.
	EndpointRefused = refused(v1.ConditionBound, v1.ReasonEndpointRefused)
	// ProviderCollision, AuthorityCollision and OperationCollision: another deployment holds
	// the providerID, the endpoint or an operation.
	ProviderCollision  = refused(v1.ConditionBound, v1.ReasonProviderCollision)
	AuthorityCollision = refused(v1.ConditionBound, v1.ReasonAuthorityCollision)
	OperationCollision = refused(v1.ConditionBound, v1.ReasonOperationCollision)

	// NoCredentialHashKey: a credential to freeze with and no credential hash key.
	NoCredentialHashKey = refused(v1.ConditionSnapshotFrozen, v1.ReasonCredentialRefused)

	// SnapshotDrift: the live tool list differs from the reviewed snapshot.
	SnapshotDrift = refused(v1.ConditionSnapshotMatched, v1.ReasonSnapshotDrift)
)

// The classifiers: where each ruleset turns library errors into outcomes.
var (
	// sourceClassifier: pack verification errors (SourceVerified).
	sourceClassifier = classifies(v1.ConditionSourceVerified, &sourceRules)
	// bindingClassifier: refusals of the endpoint binding before anything is dialed (Bound).
	bindingClassifier = classifies(v1.ConditionBound, &bindingRules)
	// credentialClassifier: refusals of the credential read for the freeze (SnapshotFrozen).
	credentialClassifier = classifies(v1.ConditionSnapshotFrozen, &bindingRules)
	// freezeClassifier: errors of the live freeze (SnapshotFrozen).
	freezeClassifier = classifies(v1.ConditionSnapshotFrozen, &freezeRules)
)

// profileStages are the McpServiceProfile's stages, in order (run by the Resolver).
var profileStages = []stage{
	{condition: v1.ConditionSourceVerified,
		decides:    []Outcome{InlineSourceRefused, NoPackVerifier, ProfileInvalid},
		classifies: []classifier{sourceClassifier}},
	{condition: v1.ConditionSnapshotReconstructed,
		decides: []Outcome{SnapshotDigestMismatch}},
}

// deploymentStages are the ServiceDeployment's stages, in the order a pass runs them. Binding
// runs before the live freeze so that an unbound deployment (no grant, a collision, an endpoint
// beyond its namespace's egress ceiling) never dials its endpoint nor reads its credential.
var deploymentStages = []stage{
	{condition: v1.ConditionProfileVerified,
		decides: []Outcome{ProfileNotFound, ProfileNotReady, ProfileWaiting, ProfileRefused}},
	{condition: v1.ConditionBound,
		decides: []Outcome{OperationSetMismatch, EndpointRefInvalid, CredentialRefMismatch, GrantNotNamed, GrantNotFound,
			GrantDenied, GrantUnreadable, EndpointRefused, ProviderCollision, AuthorityCollision, OperationCollision},
		classifies: []classifier{bindingClassifier}},
	{condition: v1.ConditionSnapshotFrozen,
		decides:    []Outcome{NoCredentialHashKey},
		classifies: []classifier{credentialClassifier, freezeClassifier}},
	{condition: v1.ConditionSnapshotMatched,
		decides: []Outcome{SnapshotDrift}},
}

// ProfileConditions returns the condition types of the McpServiceProfile stages, in the order
// they run.
func ProfileConditions() []string { return conditions(profileStages) }

// DeploymentConditions returns the condition types of the ServiceDeployment stages, in the order
// a pass runs them.
func DeploymentConditions() []string { return conditions(deploymentStages) }

// conditions returns the condition types of stages, in order.
func conditions(stages []stage) []string {
	out := make([]string, len(stages))
	for i, s := range stages {
		out[i] = s.condition
	}
	return out
}

// Outcome classes of the activation table, as docs/concepts.md names them.
const (
	// classRetried: Reconciling, retried with backoff (and at once when a watched object
	// changes); never Stalled.
	classRetried = "retried"
	// classWaiting: Reconciling until the wait grace period has passed, then Stalled;
	// re-verified at once when an object that can remove the refusal arrives.
	classWaiting = "waiting"
	// classRefused: Stalled at once; a human must change something.
	classRefused = "refused"
)

// tableRow is one line of the activation table as docs/concepts.md shows it.
type tableRow struct {
	kind, condition, reason string
	// class is classRetried, classWaiting or classRefused.
	class string
}

// activationTable lists, for the McpServiceProfile then the ServiceDeployment stages in the
// order they run, every (reason, class) outcome of each stage: the ones it decides first,
// then those of its rulesets (a delegated ruleset's in place), each once.
func activationTable() []tableRow {
	var out []tableRow
	add := func(kind string, s stage) {
		seen := map[tableRow]bool{}
		emit := func(reason, class string) {
			row := tableRow{kind: kind, condition: s.condition, reason: reason, class: class}
			if !seen[row] {
				seen[row] = true
				out = append(out, row)
			}
		}
		var walk func(rs *ruleset)
		walk = func(rs *ruleset) {
			for _, r := range append(rs.rules, rs.fallback) {
				if r.delegate != nil {
					walk(r.delegate)
					continue
				}
				emit(r.reason, Outcome{transient: r.transient, waiting: r.waiting}.class())
			}
		}
		for _, o := range s.decides {
			emit(o.reason, o.class())
		}
		for _, c := range s.classifies {
			walk(c.rules)
		}
	}
	for _, s := range profileStages {
		add("McpServiceProfile", s)
	}
	for _, s := range deploymentStages {
		add("ServiceDeployment", s)
	}
	return out
}
