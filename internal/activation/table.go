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
	// decides lists the outcomes the controllers decide themselves (not from a library error).
	decides []decision
	// classifies lists the rulesets that turn library errors of this stage into outcomes.
	classifies []*ruleset
}

// decision is an outcome a stage decides itself.
type decision struct {
	reason    string
	transient bool
	// waiting: a refusal another object can remove (StageError.Waiting).
	waiting bool
}

// profileStages are the McpServiceProfile's stages, in order (run by the Resolver).
var profileStages = []stage{
	{condition: v1.ConditionSourceVerified,
		decides: []decision{
			{reason: v1.ReasonInlineSourceRefused},
			{reason: v1.ReasonVerificationFailed}, // no pack verifier configured
			{reason: v1.ReasonProfileInvalid},
		},
		classifies: []*ruleset{&sourceRules}},
	{condition: v1.ConditionSnapshotReconstructed,
		decides: []decision{{reason: v1.ReasonSnapshotDigestMismatch}}},
}

// deploymentStages are the ServiceDeployment's stages, in the order a pass runs them. Binding
// runs before the live freeze so that an unbound deployment (no grant, a collision, an endpoint
// beyond its namespace's egress ceiling) never dials its endpoint nor reads its credential.
var deploymentStages = []stage{
	{condition: v1.ConditionProfileVerified,
		decides: []decision{
			{reason: v1.ReasonProfileNotFound, transient: true},
			{reason: v1.ReasonProfileNotReady, transient: true},
			{reason: v1.ReasonProfileNotReady, waiting: true}, // its source waits for a trust source or Secret
			{reason: v1.ReasonProfileNotReady},                // the profile is Stalled, or its source is refused
		}},
	{condition: v1.ConditionBound,
		decides: []decision{
			{reason: v1.ReasonOperationSetMismatch},
			{reason: v1.ReasonEndpointRefInvalid},
			{reason: v1.ReasonCredentialRefMismatch},
			{reason: v1.ReasonGrantNotFound},                // an operation names no grant
			{reason: v1.ReasonGrantNotFound, waiting: true}, // the RoleBinding or its role does not exist yet
			{reason: v1.ReasonGrantDenied},
			{reason: v1.ReasonProgressing, transient: true}, // a grant or its role could not be read
			{reason: v1.ReasonEndpointRefused},
			{reason: v1.ReasonProviderCollision},
			{reason: v1.ReasonAuthorityCollision},
			{reason: v1.ReasonOperationCollision},
		},
		classifies: []*ruleset{&bindingRules}},
	{condition: v1.ConditionSnapshotFrozen,
		decides:    []decision{{reason: v1.ReasonCredentialRefused}}, // no credential hash key
		classifies: []*ruleset{&bindingRules, &freezeRules}},
	{condition: v1.ConditionSnapshotMatched,
		decides: []decision{{reason: v1.ReasonSnapshotDrift}}},
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

// class returns the outcome class of a decision.
func (d decision) class() string {
	switch {
	case d.transient:
		return classRetried
	case d.waiting:
		return classWaiting
	}
	return classRefused
}

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
		seen := map[decision]bool{}
		emit := func(d decision) {
			if !seen[d] {
				seen[d] = true
				out = append(out, tableRow{kind: kind, condition: s.condition, reason: d.reason, class: d.class()})
			}
		}
		var walk func(rs *ruleset)
		walk = func(rs *ruleset) {
			for _, r := range append(rs.rules, rs.fallback) {
				if r.delegate != nil {
					walk(r.delegate)
					continue
				}
				emit(decision{reason: r.reason, transient: r.transient, waiting: r.waiting})
			}
		}
		for _, d := range s.decides {
			emit(d)
		}
		for _, rs := range s.classifies {
			walk(rs)
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
