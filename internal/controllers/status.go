package controllers

import (
	"github.com/b10x/connector-mcp/internal/activation"
	"time"

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
}

// terminal reports whether the pass reached a decision for this generation: success, or a
// refusal that needs a human (Stalled).
func (o outcome) terminal() bool { return o.failed == nil || !o.failed.Transient }

// applyConditions writes the stage, Ready, Reconciling and Stalled conditions of o into conds.
// Stages after the failing one are removed (not reached). Reconciling and Stalled are present
// only while True, as kstatus readers expect. LastTransitionTime changes only when a status
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
		case o.failed != nil && o.failed.Condition == st:
			set(st, metav1.ConditionFalse, o.failed.Reason, o.failed.Message)
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
	case o.failed.Transient:
		set(v1.ConditionReady, metav1.ConditionFalse, o.failed.Reason, o.failed.Message)
		set(v1.ConditionReconciling, metav1.ConditionTrue, o.failed.Reason, o.failed.Message)
		meta.RemoveStatusCondition(conds, v1.ConditionStalled)
	default:
		set(v1.ConditionReady, metav1.ConditionFalse, o.failed.Reason, o.failed.Message)
		set(v1.ConditionStalled, metav1.ConditionTrue, o.failed.Reason, o.failed.Message)
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
