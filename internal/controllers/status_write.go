package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// statusWrite is what patchStatus did.
type statusWrite int

const (
	// statusUnchanged: the status equals the one read; nothing was sent.
	statusUnchanged statusWrite = iota
	// statusWritten: the status was patched.
	statusWritten
	// statusGone: the object was deleted meanwhile; nothing is left to write.
	statusGone
	// statusConflict: the optimistic lock was lost: the pass read a stale object, and the newer
	// object's watch event brings the next pass.
	statusConflict
)

// conflictRetry is how soon a pass whose status write lost the optimistic lock runs again. The
// lock is lost when the pass read a cached object older than one already written (typically this
// reconciler's own previous write, milliseconds ago), so the cache catches up almost at once. It
// must be short: the profile reconciler does not watch its own status writes, so no event brings
// the next pass, and the pass that lost may have been the one that saw a dependency arrive.
const conflictRetry = 100 * time.Millisecond

// stopsPass reports whether the write ends the pass, with the result to return: the object is
// gone (nothing to retry), or the lock was lost (run again after conflictRetry).
func (w statusWrite) stopsPass() (ctrl.Result, bool) {
	switch w {
	case statusGone:
		return ctrl.Result{}, true
	case statusConflict:
		return ctrl.Result{RequeueAfter: conflictRetry}, true
	}
	return ctrl.Result{}, false
}

// statusOf returns the status of one of the kinds the reconcilers write.
func statusOf(o client.Object) any {
	switch x := o.(type) {
	case *v1.McpServiceProfile:
		return &x.Status
	case *v1.ServiceDeployment:
		return &x.Status
	case *v1.McpCredential:
		return &x.Status
	case *v1.McpTrustPolicy:
		return &x.Status
	}
	panic(fmt.Sprintf("statusOf: %T is not a kind the reconcilers write", o))
}

// statusChanged reports whether obj's status differs from orig's.
func statusChanged(obj, orig client.Object) bool {
	return !equality.Semantic.DeepEqual(statusOf(orig), statusOf(obj))
}

// patchStatus is the one status writer of the reconcilers: at the end of a pass it sends obj's
// status as a merge patch from orig (the object as the pass read it), only when the two differ.
// With lock, orig's resourceVersion is an optimistic lock, so a pass that read a stale cached
// object neither overwrites a newer status nor announces a second time. A deleted object is not
// an error.
func patchStatus(ctx context.Context, c client.Client, obj, orig client.Object, lock bool) (statusWrite, error) {
	if !statusChanged(obj, orig) {
		return statusUnchanged, nil
	}
	patch := client.MergeFrom(orig)
	if lock {
		patch = client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	}
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return statusGone, nil
		case lock && apierrors.IsConflict(err):
			return statusConflict, nil
		}
		return statusUnchanged, err
	}
	return statusWritten, nil
}
