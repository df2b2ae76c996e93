package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// Identity is who writes a decision, as the apiserver authenticates them.
type Identity struct {
	// Username, UID and Groups are the authenticated user's.
	Username, UID string
	Groups        []string
}

// WhoAmI asks the apiserver who c authenticates as (a SelfSubjectReview, which every
// authenticated user may create). A decision must record exactly this identity: the admission
// policy approval-decisions compares it with the writer's.
func WhoAmI(ctx context.Context, c client.Client) (Identity, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return Identity{}, err
	}
	u := r.Status.UserInfo
	return Identity{Username: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}, nil
}

// ErrNotPending is returned by Decide for a request that is no longer pending (decided, used or
// expired).
var ErrNotPending = errors.New("approval: the request is not pending")

// Decide approves (approve) or denies the pending McpApprovalRequest key as who, at now, with
// reason (required for a denial), through the status subresource under the resourceVersion it
// read (a conflict reads and judges again). The apiserver's admission policy refuses a writer who may not approve it, its caller, or
// an identity that is not the writer's; Decide checks nothing of that itself.
func Decide(ctx context.Context, c client.Client, key types.NamespacedName, approve bool, reason string, who Identity, now time.Time) (*apiv1.McpApprovalRequest, error) {
	if !approve && reason == "" {
		return nil, errors.New("approval: a denial needs a reason")
	}
	var rq, next *apiv1.McpApprovalRequest
	// A write of the manager's (its lifecycle) or of another gateway between the read and the
	// update is a conflict: read again and judge the fresh object (a decision made meanwhile is
	// ErrNotPending, never overwritten).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rq = &apiv1.McpApprovalRequest{}
		if err := c.Get(ctx, key, rq); err != nil {
			return err
		}
		if st := rq.EffectiveState(metav1.NewTime(now)); st != apiv1.ApprovalPending {
			return fmt.Errorf("%w (state %s)", ErrNotPending, st)
		}
		next = rq.DeepCopy()
		next.Status.State = apiv1.ApprovalDenied
		if approve {
			next.Status.State = apiv1.ApprovalApproved
		}
		next.Status.Decision = &apiv1.ApprovalDecision{Approver: who.Username, ApproverUID: who.UID,
			ApproverGroups: slices.Clone(who.Groups), Time: metav1.NewTime(now.Truncate(time.Second)), Reason: reason}
		return c.Status().Update(ctx, next)
	})
	if err != nil {
		if rq != nil && rq.Name == "" {
			rq = nil
		}
		return rq, err
	}
	return next, nil
}
