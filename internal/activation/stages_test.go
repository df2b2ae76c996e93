package activation

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// misplaced returns the outcomes and classifiers of a declaration list that no row of stages
// lists, or that a row of another condition lists: each would be a stage outcome the table (and
// docs/concepts.md, which shows it) does not show.
func misplaced(stages []stage, outcomes []Outcome, cls []classifier) []string {
	var out []string
	for _, o := range outcomes {
		n := 0
		for _, s := range stages {
			for _, d := range s.decides {
				if d == o {
					n++
					if s.condition != o.condition {
						out = append(out, fmt.Sprintf("%s/%s (%s) is listed under %s", o.condition, o.reason, o.class(), s.condition))
					}
				}
			}
		}
		if n != 1 {
			out = append(out, fmt.Sprintf("%s/%s (%s) is listed %d times", o.condition, o.reason, o.class(), n))
		}
	}
	for _, c := range cls {
		n := 0
		for _, s := range stages {
			for _, sc := range s.classifies {
				if sc == c {
					n++
					if s.condition != c.condition {
						out = append(out, fmt.Sprintf("the %s rules of %s are listed under %s", c.rules.name, c.condition, s.condition))
					}
				}
			}
		}
		if n != 1 {
			out = append(out, fmt.Sprintf("the %s rules of %s are listed %d times", c.rules.name, c.condition, n))
		}
	}
	return out
}

// The table is the source of truth: a stage outcome is built only from an Outcome the table
// declares (StageError has no exported constructor beside Outcome's, nor exported fields) or by a
// classifier, and every declared Outcome and classifier is listed exactly once, in the row of its
// own condition. Twins: an outcome or classifier no row lists, or one listed under another
// condition, is found.
func TestDeclaredOutcomesAreInTheirRows(t *testing.T) {
	all := append(append([]stage(nil), profileStages...), deploymentStages...)
	if len(decided) < 20 || len(classifiers) < 4 {
		t.Fatalf("only %d outcomes and %d classifiers registered", len(decided), len(classifiers))
	}
	for _, m := range misplaced(all, decided, classifiers) {
		t.Error(m)
	}
	stray := Outcome{condition: v1.ConditionBound, reason: v1.ReasonSnapshotDrift}
	wrongRow := Outcome{condition: v1.ConditionSnapshotMatched, reason: v1.ReasonGrantDenied}
	rows := append(append([]stage(nil), all...), stage{condition: v1.ConditionBound, decides: []Outcome{wrongRow}})
	strayRules := classifier{condition: v1.ConditionProfileVerified, rules: &freezeRules}
	if got := misplaced(rows, []Outcome{stray, wrongRow}, []classifier{strayRules}); len(got) != 3 {
		t.Fatalf("twin: misplaced found %q, want 3", got)
	}
}

// Every outcome carries its declared class and condition into the StageError, and a classified
// library error keeps its cause.
func TestOutcomesBuildTheirClass(t *testing.T) {
	for _, tc := range []struct {
		o                  Outcome
		transient, waiting bool
	}{{ProfileNotReady, true, false}, {ProfileWaiting, false, true}, {ProfileRefused, false, false}, {GrantNotFound, false, true}} {
		cause := errors.New("cause")
		serr := tc.o.Wrap(cause, "profile %q", "p")
		if serr.Transient() != tc.transient || serr.Waiting() != tc.waiting || serr.Condition() != tc.o.Condition() ||
			serr.Reason() != tc.o.Reason() || serr.Message() != `profile "p"` || !errors.Is(serr, cause) || !errors.Is(serr, ErrStage) {
			t.Errorf("%s/%s: got %v (transient %v, waiting %v)", tc.o.Condition(), tc.o.Reason(), serr, serr.Transient(), serr.Waiting())
		}
	}
	if serr := ClassifyCredentialError(errors.New("x")); serr.Condition() != v1.ConditionSnapshotFrozen {
		t.Errorf("credential refusal under %s", serr.Condition())
	}
	if serr := ClassifyBindingError(errors.New("x")); serr.Condition() != v1.ConditionBound {
		t.Errorf("binding refusal under %s", serr.Condition())
	}
}

// The deployment stages are in the documented order: binding before the live freeze, so that an
// unbound deployment never dials (the reconciler runs them in this order:
// TestDeploymentStagesFollowTheTable in internal/controllers).
func TestDeploymentStageOrder(t *testing.T) {
	want := []string{v1.ConditionProfileVerified, v1.ConditionBound, v1.ConditionSnapshotFrozen, v1.ConditionSnapshotMatched}
	got := conditions(deploymentStages)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stages %v, want %v", got, want)
	}
	if got := conditions(profileStages); strings.Join(got, ",") != v1.ConditionSourceVerified+","+v1.ConditionSnapshotReconstructed {
		t.Fatalf("profile stages %v", got)
	}
}
