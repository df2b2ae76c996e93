package controllers

import (
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// outcome is the result of one pass of a pipeline: the stages that passed in order, and the
// stage error that stopped it (nil when every stage passed).
type outcome struct {
	stages []string
	failed *activation.StageError
	// readyReason and readyMessage describe success.
	readyReason, readyMessage string
	// waitOver is set when failed is Waiting and the wait grace period has passed (see
	// waitState): the refusal then reads Stalled. Otherwise waitLeft is how long it may still
	// read Reconciling.
	waitOver bool
	waitLeft time.Duration
}

// waiting records, for a pass that stopped on a waiting refusal, whether its grace period has
// passed (from the conditions conds written before this pass).
func (o *outcome) waiting(conds []metav1.Condition, generation int64, now time.Time, grace time.Duration) {
	if o.failed != nil && o.failed.Waiting() {
		o.waitOver, o.waitLeft = waitState(conds, generation, now, grace)
	}
}

// reconciling reports whether the pass stopped on a refusal that reads Reconciling: a transient
// failure, or a waiting refusal within its grace period.
func (o outcome) reconciling() bool {
	return o.failed != nil && (o.failed.Transient() || (o.failed.Waiting() && !o.waitOver))
}

// terminal reports whether the pass reached a decision for this generation: success, or a
// refusal that needs a human (Stalled).
func (o outcome) terminal() bool { return !o.reconciling() }

// defaultWaitGracePeriod is the default of the reconcilers' WaitGracePeriod.
const defaultWaitGracePeriod = 2 * time.Minute

// waitMargin is added to the requeue at the end of a wait, so that the pass it brings finds the
// grace period over.
const waitMargin = 50 * time.Millisecond

// retryAfter is the delay before the next pass of an outcome that reads Reconciling: the
// exponential, jittered backoff d, or, for a waiting refusal, the end of its grace period when
// that comes first, so that it reads Stalled on time.
func (o outcome) retryAfter(d time.Duration) time.Duration {
	if o.failed != nil && o.failed.Waiting() && o.waitLeft+waitMargin < d {
		return o.waitLeft + waitMargin
	}
	return d
}

// waitState tells, from the conditions written before this pass, whether an object whose pass
// stopped on a waiting refusal has waited longer than grace for this generation, and else how
// long it may still wait. The wait starts when Reconciling became True for this generation (a
// transient failure before it counts as waiting); once Stalled for this generation, it stays
// over. A Reconciling condition of an older generation starts a new wait (applyConditions
// then writes it afresh).
func waitState(conds []metav1.Condition, generation int64, now time.Time, grace time.Duration) (over bool, left time.Duration) {
	if grace <= 0 {
		grace = defaultWaitGracePeriod
	}
	if c := meta.FindStatusCondition(conds, v1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation {
		return true, 0
	}
	c := meta.FindStatusCondition(conds, v1.ConditionReconciling)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != generation {
		return false, grace
	}
	left = grace - now.Sub(c.LastTransitionTime.Time)
	return left <= 0, max(left, 0)
}

// applyConditions writes the stage, Ready, Reconciling and Stalled conditions of o into conds.
// Stages after the failing one are removed (not reached). Reconciling (a transient failure, or
// a waiting refusal within its grace period) and Stalled (any other refusal) are present only
// while True, as kstatus readers expect. LastTransitionTime changes only when a status
// changes, so an unchanged outcome rewrites nothing.
func applyConditions(conds *[]metav1.Condition, generation int64, now time.Time, o outcome) {
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: clipN(msg, 1024),
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	}
	reached := true
	for _, st := range o.stages {
		switch {
		case !reached:
			meta.RemoveStatusCondition(conds, st)
		case o.failed != nil && o.failed.Condition() == st:
			set(st, metav1.ConditionFalse, o.failed.Reason(), o.failed.Message())
			reached = false
		default:
			set(st, metav1.ConditionTrue, v1.ReasonSucceeded, st+" passed")
		}
	}
	switch {
	case o.failed == nil:
		set(v1.ConditionReady, metav1.ConditionTrue, o.readyReason, o.readyMessage)
		meta.RemoveStatusCondition(conds, v1.ConditionReconciling)
		meta.RemoveStatusCondition(conds, v1.ConditionStalled)
	case o.reconciling():
		set(v1.ConditionReady, metav1.ConditionFalse, o.failed.Reason(), o.failed.Message())
		if c := meta.FindStatusCondition(*conds, v1.ConditionReconciling); c != nil && c.ObservedGeneration != generation {
			// A new generation: its wait (waitState) starts now.
			meta.RemoveStatusCondition(conds, v1.ConditionReconciling)
		}
		set(v1.ConditionReconciling, metav1.ConditionTrue, o.failed.Reason(), o.failed.Message())
		meta.RemoveStatusCondition(conds, v1.ConditionStalled)
	default:
		set(v1.ConditionReady, metav1.ConditionFalse, o.failed.Reason(), o.failed.Message())
		set(v1.ConditionStalled, metav1.ConditionTrue, o.failed.Reason(), o.failed.Message())
		meta.RemoveStatusCondition(conds, v1.ConditionReconciling)
	}
}

// readyReason returns the reason of the Ready condition, or "" when absent.
func readyReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// setConditions writes want, for generation, as the kstatus conditions of conds: each of Ready,
// Stalled and Reconciling that want does not hold is removed, and LastTransitionTime changes only
// with a condition's status (the writer of the credential and trust-policy reconcilers, whose
// outcomes are their whole condition set).
func setConditions(conds *[]metav1.Condition, want []metav1.Condition, generation int64) {
	for _, t := range []string{v1.ConditionReady, v1.ConditionStalled, v1.ConditionReconciling} {
		if meta.FindStatusCondition(want, t) == nil {
			meta.RemoveStatusCondition(conds, t)
		}
	}
	for _, w := range want {
		w.ObservedGeneration = generation
		meta.SetStatusCondition(conds, w)
	}
}
