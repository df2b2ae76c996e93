package invocation

import (
	"context"
	"errors"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// The RBAC attributes every invocation is authorized against. A Grant of a ServiceDeployment is a
// RoleBinding whose role allows exactly this, so `kubectl auth can-i invoke
// servicedeployments/NAME -n NAMESPACE --as USER` answers what Invoke will decide.
const (
	// Verb is the RBAC verb: "invoke".
	Verb = apiv1.InvokeVerb
	// Resource is the RBAC resource: "servicedeployments".
	Resource = apiv1.ServiceDeploymentsResource
	// Group is the RBAC API group, apiv1.GroupVersion.Group (a constant, so no caller can change
	// what is authorized).
	Group = "connectors.b10x.io"
)

// Caller is an authenticated caller, as the consumer (a gateway, the operator) authenticated it.
// This package does not authenticate; it authorizes the identity it is given.
type Caller struct {
	// User is the Kubernetes user name, e.g. "system:serviceaccount:team-a:agent". Required.
	User string
	// UID is the user's UID, when known.
	UID string
	// Groups are the user's groups, e.g. "system:serviceaccounts".
	Groups []string
	// Extra is additional authenticator information (passed to the SubjectAccessReview).
	Extra map[string][]string
	// Seed is the stable caller-authority seed bound into every lease: a value that stays the
	// same for as long as this caller's authority does and differs between callers, e.g.
	// IdentitySeed(caller) or the gateway's tenant key. Required; never a secret (it may be
	// logged), never a token.
	Seed string
}

// IdentitySeed returns a caller-authority seed derived from the Kubernetes identity alone, for
// consumers with no authority key of their own: "uid:<UID>" when the UID is known (a
// ServiceAccount deleted and re-created under the same name gets a new UID, so the old one's
// leases go stale), else "user:<User>". Groups are not part of it: group membership is decided by
// the SubjectAccessReview on every call.
func IdentitySeed(c Caller) string {
	if c.UID != "" {
		return "uid:" + c.UID
	}
	return "user:" + c.User
}

// Target is the object an invocation is authorized on: one ServiceDeployment.
type Target struct {
	// Namespace is the deployment's namespace.
	Namespace string
	// Name is the deployment's name.
	Name string
}

// Authorizer decides whether caller may invoke target (verb "invoke" on "servicedeployments" in
// group "connectors.b10x.io", name and namespace of the deployment). It returns an error only
// when it cannot decide; invocation then fails closed.
type Authorizer interface {
	Authorize(ctx context.Context, caller Caller, target Target) (allowed bool, err error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, caller Caller, target Target) (bool, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, caller Caller, target Target) (bool, error) {
	return f(ctx, caller, target)
}

// SubjectAccessReviewer is the Authorizer of a cluster: it creates an
// authorization.k8s.io/v1 SubjectAccessReview for the caller and reads the apiserver's decision.
// The manager's ServiceAccount needs "create" on subjectaccessreviews.
type SubjectAccessReviewer struct {
	// Client creates the review; any controller-runtime client (reviews are never cached).
	Client client.Client
}

var _ Authorizer = (*SubjectAccessReviewer)(nil)

// Review returns the SubjectAccessReview that Authorize creates for caller and target.
func Review(caller Caller, target Target) *authorizationv1.SubjectAccessReview {
	var extra map[string]authorizationv1.ExtraValue
	if len(caller.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(caller.Extra))
		for k, v := range caller.Extra {
			extra[k] = append(authorizationv1.ExtraValue(nil), v...)
		}
	}
	return &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: target.Namespace,
				Verb:      Verb,
				Group:     Group,
				Resource:  Resource,
				Name:      target.Name,
			},
			User:   caller.User,
			UID:    caller.UID,
			Groups: append([]string(nil), caller.Groups...),
			Extra:  extra,
		},
	}
}

// Authorize creates the review and reports status.allowed (and not status.denied). The
// apiserver's reason and evaluation error are not surfaced.
func (a *SubjectAccessReviewer) Authorize(ctx context.Context, caller Caller, target Target) (bool, error) {
	if a == nil || a.Client == nil {
		return false, errors.New("invocation: SubjectAccessReviewer has no client")
	}
	sar := Review(caller, target)
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}
