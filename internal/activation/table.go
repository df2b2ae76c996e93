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
}

// profileStages are the McpServiceProfile's stages, in order (run by the Resolver).
var profileStages = []stage{
	{condition: v1.ConditionSourceVerified,
		decides: []decision{
			{v1.ReasonInlineSourceRefused, false},
			{v1.ReasonVerificationFailed, false}, // no pack verifier configured
			{v1.ReasonProfileInvalid, false},
		},
		classifies: []*ruleset{&sourceRules}},
	{condition: v1.ConditionSnapshotReconstructed,
		decides: []decision{{v1.ReasonSnapshotDigestMismatch, false}}},
}

// deploymentStages are the ServiceDeployment's stages, in the order a pass runs them. Binding
// runs before the live freeze so that an unbound deployment (no grant, a collision, an endpoint
// beyond its namespace's egress ceiling) never dials its endpoint nor reads its credential.
var deploymentStages = []stage{
	{condition: v1.ConditionProfileVerified,
		decides: []decision{
			{v1.ReasonProfileNotFound, true},
			{v1.ReasonProfileNotReady, true},
			{v1.ReasonProfileNotReady, false}, // the profile is Stalled, or its source is refused
		}},
	{condition: v1.ConditionBound,
		decides: []decision{
			{v1.ReasonOperationSetMismatch, false},
			{v1.ReasonEndpointRefInvalid, false},
			{v1.ReasonCredentialRefMismatch, false},
			{v1.ReasonGrantNotFound, false},
			{v1.ReasonGrantDenied, false},
			{v1.ReasonProgressing, true}, // a grant or its role could not be read
			{v1.ReasonEndpointRefused, false},
			{v1.ReasonProviderCollision, false},
			{v1.ReasonAuthorityCollision, false},
			{v1.ReasonOperationCollision, false},
		},
		classifies: []*ruleset{&bindingRules}},
	{condition: v1.ConditionSnapshotFrozen,
		decides:    []decision{{v1.ReasonCredentialRefused, false}}, // no credential hash key
		classifies: []*ruleset{&bindingRules, &freezeRules}},
	{condition: v1.ConditionSnapshotMatched,
		decides: []decision{{v1.ReasonSnapshotDrift, false}}},
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

// tableRow is one line of the activation table as docs/concepts.md shows it.
type tableRow struct {
	kind, condition, reason string
	transient               bool
}

// activationTable lists, for the McpServiceProfile then the ServiceDeployment stages in the
// order they run, every (reason, transient) outcome of each stage: the ones it decides first,
// then those of its rulesets (a delegated ruleset's in place), each once.
func activationTable() []tableRow {
	var out []tableRow
	add := func(kind string, s stage) {
		seen := map[decision]bool{}
		emit := func(d decision) {
			if !seen[d] {
				seen[d] = true
				out = append(out, tableRow{kind: kind, condition: s.condition, reason: d.reason, transient: d.transient})
			}
		}
		var walk func(rs *ruleset)
		walk = func(rs *ruleset) {
			for _, r := range append(rs.rules, rs.fallback) {
				if r.delegate != nil {
					walk(r.delegate)
					continue
				}
				emit(decision{r.reason, r.transient})
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
