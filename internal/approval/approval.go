// Package approval is the approval of calls to operations that require it (docs/approval.md):
// the policy (RequiresApproval with the McpTrustPolicy floor), the McpApprovalRequest a call
// creates (caller, deployment, operation, snapshot, profile and RFC 8785 argument digests,
// expiry, a bounded preview), and the exactly-once use of an approved request by its retry. Gate
// is the invocation.Gate the gateway gives its surfaces.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/snapshot"
)

// The refusal names of approval.
const (
	// RefusalApprovalRequired: the operation requires approval; a request was created (its name
	// is in the refusal) and the call was not sent.
	RefusalApprovalRequired = "approval_required"
	// RefusalApprovalPending: the named request is not decided yet.
	RefusalApprovalPending = "approval_pending"
	// RefusalApprovalDenied: the named request was denied.
	RefusalApprovalDenied = "approval_denied"
	// RefusalApprovalExpired: the named request passed its expiry.
	RefusalApprovalExpired = "approval_expired"
	// RefusalApprovalUsed: the named request already ran its call (exactly once).
	RefusalApprovalUsed = "approval_used"
	// RefusalApprovalMismatch: the named request is for another caller, deployment, operation,
	// snapshot, profile or arguments than this call (or does not exist).
	RefusalApprovalMismatch = "approval_mismatch"
	// RefusalApprovalNotAuthorized: the recorded approver is the caller, or is not (or no longer)
	// allowed to approve the request.
	RefusalApprovalNotAuthorized = "approval_not_authorized"
	// RefusalApprovalLimit: the caller has as many open requests as the gateway allows.
	RefusalApprovalLimit = "approval_limit_exceeded"
	// RefusalApprovalUnavailable: the approval state could not be read or written (transient).
	RefusalApprovalUnavailable = "approval_unavailable"
	// RefusalApprovalArguments: the arguments have no canonical form (RFC 8785) to bind an
	// approval to (e.g. an integer beyond 2^53).
	RefusalApprovalArguments = "approval_arguments_not_canonical"
)

// Defaults of Gate.
const (
	// DefaultTTL is how long a new request is usable when the caller asks for nothing else.
	DefaultTTL = 15 * time.Minute
	// DefaultMaxTTL is the ceiling of the lifetime a caller may ask for.
	DefaultMaxTTL = 24 * time.Hour
	// DefaultMaxOpenPerCaller bounds one caller's open (pending or approved, unexpired, unused)
	// requests in one namespace.
	DefaultMaxOpenPerCaller = 16
	// RetryHint is the hint of an approval_required refusal.
	RetryHint = "ask an approver to approve the request, then repeat the same call with _meta \"" + apiv1.ApprovalMetaKey + "\" set to the request name"
)

// ErrApproval matches every *Refusal.
var ErrApproval = errors.New("approval: call not approved")

// Refusal is an approval refusal: Name, and the request it concerns (the one created, for
// approval_required; the one named, otherwise). It carries no argument, token or approver prose.
type Refusal struct {
	// Name is the refusal name.
	Name string
	// Request is the McpApprovalRequest's name ("" when none).
	Request string
	// Namespace is the request's namespace.
	Namespace string
}

func (e *Refusal) Error() string {
	if e.Request == "" {
		return "approval: refused " + e.Name
	}
	return fmt.Sprintf("approval: refused %s (McpApprovalRequest %s/%s)", e.Name, e.Namespace, e.Request)
}

// Refusal returns the refusal name.
func (e *Refusal) Refusal() string { return e.Name }

// Unwrap returns ErrApproval.
func (e *Refusal) Unwrap() error { return ErrApproval }

// Event is one approval event, for metrics and the audit log.
type Event struct {
	// Kind is "requested", "used" or the refusal name of a refused retry.
	Kind string
	// Namespace and Request name the McpApprovalRequest; Deployment and Operation the call.
	Namespace, Request, Deployment, Operation string
	// User is the caller.
	User string
}

// Floor reports whether an McpTrustPolicy makes approval a floor for the destructive operations
// of namespace.
type Floor func(ctx context.Context, namespace string) (bool, error)

// TrustPolicyFloor is the Floor of the McpTrustPolicies that select the namespace
// (spec.approval.requireForDestructive of any of them), read with reader.
func TrustPolicyFloor(reader client.Reader) Floor {
	return func(ctx context.Context, ns string) (bool, error) {
		tps, err := k8sbinding.SelectingTrustPolicies(ctx, reader, ns)
		if err != nil {
			return false, err
		}
		for _, tp := range tps {
			if tp.Spec.Approval.RequireForDestructive {
				return true, nil
			}
		}
		return false, nil
	}
}

// Gate is the invocation.Gate of approval. A call to an operation that requires approval
// (apiv1.RequiresApproval of its binding, effect and the Floor) without a request name creates an
// McpApprovalRequest and is refused approval_required; with one, it runs only when that request is
// approved by someone allowed to (re-checked here with a SubjectAccessReview), unexpired, unused,
// and for the same caller, deployment, operation, snapshot, profile and argument digest. The
// request is marked Used by an update under its resourceVersion right before the call is sent, so
// two gateway replicas run it at most once.
type Gate struct {
	// Client creates requests and SubjectAccessReviews and updates request status. Required.
	Client client.Client
	// Reader reads requests fresh (uncached: an API reader). Required.
	Reader client.Reader
	// Floor is the trust-policy floor (nil: none).
	Floor Floor
	// TTL is the default lifetime of a request (zero: DefaultTTL); MaxTTL the ceiling of a
	// caller's ask (zero: DefaultMaxTTL).
	TTL, MaxTTL time.Duration
	// MaxOpenPerCaller bounds a caller's open requests per namespace (zero:
	// DefaultMaxOpenPerCaller).
	MaxOpenPerCaller int
	// Preview bounds the argument preview (zero fields: the defaults).
	Preview PreviewBounds
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock
	// OnEvent, when set, receives every event (metrics).
	OnEvent func(Event)
	// Log receives the audit records ("Approval") and failures (nil: discard).
	Log logr.Logger
}

var _ invocation.Gate = (*Gate)(nil)

func (g *Gate) now() time.Time {
	if g.Clock == nil {
		return time.Now()
	}
	return g.Clock.Now()
}

func (g *Gate) event(e Event) {
	g.Log.Info("Approval", "event", e.Kind, "namespace", e.Namespace, "request", e.Request,
		"deployment", e.Deployment, "operation", e.Operation, "user", e.User)
	if g.OnEvent != nil {
		g.OnEvent(e)
	}
}

// Check implements invocation.Gate.
func (g *Gate) Check(ctx context.Context, c *invocation.GatedCall) (func(context.Context) error, error) {
	ns := c.Target.Namespace
	floor := false
	if g.Floor != nil && c.Effect == apiv1.EffectDestructive {
		f, err := g.Floor(ctx, ns)
		if err != nil {
			g.Log.Info("Approval floor unavailable", "namespace", ns, "reason", err.Error())
			return nil, &Refusal{Name: RefusalApprovalUnavailable}
		}
		floor = f
	}
	if !apiv1.RequiresApproval(c.Mode, c.Effect, floor) {
		return nil, nil
	}
	digest, err := snapshot.DescriptorDigest(c.Arguments)
	if err != nil {
		return nil, &Refusal{Name: RefusalApprovalArguments}
	}
	if c.Approval.Request == "" {
		return nil, g.request(ctx, c, digest)
	}
	return g.retry(ctx, c, digest)
}

// CallerHash is the value of apiv1.ApprovalCallerLabel for a caller: a hash of the user name (a
// label cannot hold every user name).
func CallerHash(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:16])
}

// newName returns a fresh request name: "apr-" and 16 random base32 characters.
func newName() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "apr-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])), nil
}

// request creates the McpApprovalRequest of c and returns the approval_required refusal naming
// it (or the refusal that stopped it).
func (g *Gate) request(ctx context.Context, c *invocation.GatedCall, digest string) error {
	ns, user := c.Target.Namespace, c.Caller.User
	max := g.MaxOpenPerCaller
	if max <= 0 {
		max = DefaultMaxOpenPerCaller
	}
	var list apiv1.McpApprovalRequestList
	if err := g.Reader.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{apiv1.ApprovalCallerLabel: CallerHash(user)}); err != nil {
		g.Log.Info("Approval requests could not be listed", "namespace", ns, "reason", apierrors.ReasonForError(err))
		return &Refusal{Name: RefusalApprovalUnavailable}
	}
	now := metav1.NewTime(g.now())
	open := 0
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.Caller.Username != user {
			continue
		}
		if st := r.EffectiveState(now); st == apiv1.ApprovalPending || st == apiv1.ApprovalApproved {
			open++
		}
	}
	if open >= max {
		g.event(Event{Kind: RefusalApprovalLimit, Namespace: ns, Deployment: c.Target.Name, Operation: c.Operation, User: user})
		return &Refusal{Name: RefusalApprovalLimit}
	}
	ttl, ceiling := g.TTL, g.MaxTTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxTTL
	}
	if c.Approval.TTL > 0 {
		ttl = c.Approval.TTL
	}
	ttl = min(ttl, ceiling)
	preview, truncated := Preview(c.Arguments, c.Sensitive, g.Preview)
	name, err := newName()
	if err != nil {
		return &Refusal{Name: RefusalApprovalUnavailable}
	}
	req := &apiv1.McpApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			apiv1.ApprovalCallerLabel: CallerHash(user), apiv1.ApprovalDeploymentLabel: labelValue(c.Target.Name)}},
		Spec: apiv1.McpApprovalRequestSpec{
			DeploymentName: c.Target.Name, Operation: c.Operation, Effect: c.Effect,
			Caller:         apiv1.ApprovalCaller{Username: user, UID: c.Caller.UID},
			SnapshotDigest: c.Snapshot, ProfileDigest: c.Profile, ArgumentsDigest: digest,
			ExpiresAt: metav1.NewTime(now.Add(ttl).Truncate(time.Second)),
			Preview:   preview, PreviewTruncated: truncated,
		},
	}
	if err := g.Client.Create(ctx, req); err != nil {
		g.Log.Info("Approval request could not be created", "namespace", ns, "reason", apierrors.ReasonForError(err))
		return &Refusal{Name: RefusalApprovalUnavailable}
	}
	g.event(Event{Kind: "requested", Namespace: ns, Request: name, Deployment: c.Target.Name, Operation: c.Operation, User: user})
	return &Refusal{Name: RefusalApprovalRequired, Request: name, Namespace: ns}
}

// labelValue is s if it is a valid label value, else its hash.
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return CallerHash(s)
}

// retry judges the retry of c naming a request, and returns the commit that marks it Used.
func (g *Gate) retry(ctx context.Context, c *invocation.GatedCall, digest string) (func(context.Context) error, error) {
	ns, name := c.Target.Namespace, c.Approval.Request
	refuse := func(reason string) error {
		g.event(Event{Kind: reason, Namespace: ns, Request: name, Deployment: c.Target.Name, Operation: c.Operation, User: c.Caller.User})
		return &Refusal{Name: reason, Request: name, Namespace: ns}
	}
	req := &apiv1.McpApprovalRequest{}
	if err := g.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, req); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refuse(RefusalApprovalMismatch)
		}
		g.Log.Info("Approval request could not be read", "namespace", ns, "request", name, "reason", apierrors.ReasonForError(err))
		return nil, &Refusal{Name: RefusalApprovalUnavailable, Request: name, Namespace: ns}
	}
	if reason := g.judge(ctx, req, c, digest); reason != "" {
		return nil, refuse(reason)
	}
	return func(ctx context.Context) error { return g.consume(ctx, req, c) }, nil
}

// judge returns the refusal of using req for c ("" when it may run).
func (g *Gate) judge(ctx context.Context, req *apiv1.McpApprovalRequest, c *invocation.GatedCall, digest string) string {
	s := &req.Spec
	if s.Caller.Username != c.Caller.User || s.Caller.UID != c.Caller.UID || s.DeploymentName != c.Target.Name ||
		s.Operation != c.Operation || s.SnapshotDigest != c.Snapshot || s.ProfileDigest != c.Profile || s.ArgumentsDigest != digest {
		return RefusalApprovalMismatch
	}
	if st := req.EffectiveState(metav1.NewTime(g.now())); st != apiv1.ApprovalApproved {
		return stateRefusal(st)
	}
	d := req.Status.Decision
	if d == nil || d.Approver == "" || d.Approver == s.Caller.Username {
		return RefusalApprovalNotAuthorized
	}
	allowed, err := g.mayApprove(ctx, req)
	if err != nil {
		g.Log.Info("Approver could not be authorized", "namespace", req.Namespace, "request", req.Name, "reason", apierrors.ReasonForError(err))
		return RefusalApprovalUnavailable
	}
	if !allowed {
		return RefusalApprovalNotAuthorized
	}
	return ""
}

// mayApprove asks the apiserver whether the recorded approver may approve req (verb approve on
// this mcpapprovalrequest), with the groups the decision recorded.
func (g *Gate) mayApprove(ctx context.Context, req *apiv1.McpApprovalRequest) (bool, error) {
	d := req.Status.Decision
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: req.Namespace, Verb: apiv1.ApproveVerb, Group: apiv1.GroupVersion.Group,
			Resource: apiv1.ApprovalRequestsResource, Name: req.Name,
		},
		User: d.Approver, UID: d.ApproverUID, Groups: slices.Clone(d.ApproverGroups),
	}}
	if err := g.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// consume marks req Used under the resourceVersion it was read with: of two replicas racing, one
// update wins and the other, reading the request again, is refused approval_used (nothing sent).
// A conflict with another writer (the manager recording an Event) reads the request again and
// judges it anew, at most consumeAttempts times.
func (g *Gate) consume(ctx context.Context, req *apiv1.McpApprovalRequest, c *invocation.GatedCall) error {
	ns, name := req.Namespace, req.Name
	refuse := func(reason string) error {
		g.event(Event{Kind: reason, Namespace: ns, Request: name, Deployment: c.Target.Name, Operation: c.Operation, User: c.Caller.User})
		return &Refusal{Name: reason, Request: name, Namespace: ns}
	}
	for attempt := 0; ; attempt++ {
		now := metav1.NewTime(g.now())
		if req.EffectiveState(now) != apiv1.ApprovalApproved {
			return refuse(stateRefusal(req.EffectiveState(now)))
		}
		used := req.DeepCopy()
		used.Status.State = apiv1.ApprovalUsed
		used.Status.UsedTime = &now
		err := g.Client.Status().Update(ctx, used)
		if err == nil {
			g.event(Event{Kind: "used", Namespace: ns, Request: name, Deployment: c.Target.Name, Operation: c.Operation, User: c.Caller.User})
			return nil
		}
		if !apierrors.IsConflict(err) || attempt+1 >= consumeAttempts {
			g.Log.Info("Approval request could not be marked used", "namespace", ns, "request", name, "reason", apierrors.ReasonForError(err))
			if apierrors.IsConflict(err) {
				return refuse(RefusalApprovalUsed)
			}
			return refuse(RefusalApprovalUnavailable)
		}
		fresh := &apiv1.McpApprovalRequest{}
		if err := g.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fresh); err != nil {
			return refuse(RefusalApprovalUnavailable)
		}
		if !specEqual(&fresh.Spec, &req.Spec) {
			return refuse(RefusalApprovalMismatch)
		}
		req = fresh
	}
}

// consumeAttempts bounds the updates one consume tries when another writer changed the request.
const consumeAttempts = 3

// specEqual compares the fields of two specs that bind a call.
func specEqual(a, b *apiv1.McpApprovalRequestSpec) bool {
	return a.Caller == b.Caller && a.DeploymentName == b.DeploymentName && a.Operation == b.Operation &&
		a.SnapshotDigest == b.SnapshotDigest && a.ProfileDigest == b.ProfileDigest && a.ArgumentsDigest == b.ArgumentsDigest &&
		a.ExpiresAt.Equal(&b.ExpiresAt)
}

// stateRefusal is the refusal of a retry naming a request in state st (not Approved).
func stateRefusal(st apiv1.ApprovalState) string {
	switch st {
	case apiv1.ApprovalDenied:
		return RefusalApprovalDenied
	case apiv1.ApprovalExpired:
		return RefusalApprovalExpired
	case apiv1.ApprovalUsed:
		return RefusalApprovalUsed
	}
	return RefusalApprovalPending
}
