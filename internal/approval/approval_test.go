package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/snapshot"
)

func TestRequiresApproval(t *testing.T) {
	for _, tc := range []struct {
		mode   apiv1.ApprovalMode
		effect apiv1.Effect
		floor  bool
		want   bool
	}{
		{"", apiv1.EffectDestructive, false, true},
		{"", apiv1.EffectWrite, false, false},
		{"", apiv1.EffectRead, false, false},
		{apiv1.ApprovalNone, apiv1.EffectDestructive, false, false},
		{apiv1.ApprovalNone, apiv1.EffectDestructive, true, true}, // the floor wins over None
		{apiv1.ApprovalRequired, apiv1.EffectRead, false, true},
		{apiv1.ApprovalNone, apiv1.EffectWrite, true, false}, // the floor is for destructive ones
	} {
		if got := apiv1.RequiresApproval(tc.mode, tc.effect, tc.floor); got != tc.want {
			t.Errorf("RequiresApproval(%q, %q, %v) = %v, want %v", tc.mode, tc.effect, tc.floor, got, tc.want)
		}
	}
}

func TestPreview(t *testing.T) {
	args := json.RawMessage(`{"z":1,"password":"hunter2","text":"` + strings.Repeat("é", 200) + `","a":{"b" : [1, 2]}}`)
	out, truncated := Preview(args, []string{"password"}, PreviewBounds{MaxValueBytes: 64})
	if truncated || len(out) != 4 {
		t.Fatalf("preview: %+v truncated %v", out, truncated)
	}
	if out[0].Name != "a" || out[0].Value != `{"b":[1,2]}` || out[1].Name != "password" || out[3].Name != "z" {
		t.Fatalf("preview not sorted and canonical: %+v", out)
	}
	if p := out[1]; !p.Sensitive || p.Value != "" || !strings.HasPrefix(p.Digest, "sha256:") {
		t.Fatalf("a sensitive argument is shown: %+v", p)
	}
	for _, p := range out {
		if strings.Contains(p.Value, "hunter2") {
			t.Fatal("sensitive value in the preview")
		}
	}
	if p := out[2]; !p.Truncated || len(p.Value) > 64 || !strings.HasPrefix(p.Value, `"éé`) {
		t.Fatalf("long value not cut on a rune boundary: %q (%d bytes)", p.Value, len(p.Value))
	}
	want, _ := snapshot.DescriptorDigest([]byte(`"` + strings.Repeat("é", 200) + `"`))
	if out[2].Digest != want {
		t.Fatalf("digest of a cut value is not the whole value's")
	}
	// Member bound.
	many := `{"a":1,"b":2,"c":3}`
	if out, truncated := Preview(json.RawMessage(many), nil, PreviewBounds{MaxMembers: 2}); !truncated || len(out) != 2 {
		t.Fatalf("member bound: %d members, truncated %v", len(out), truncated)
	}
}

// gateFixture is a Gate over a fake client whose SubjectAccessReviews allow the users in allow.
type gateFixture struct {
	g     *Gate
	c     client.Client
	clk   *clocktesting.FakeClock
	allow map[string]bool
	sars  int
}

func newGateFixture(t *testing.T) *gateFixture {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	_ = corev1.AddToScheme(s)
	_ = authorizationv1.AddToScheme(s)
	f := &gateFixture{clk: clocktesting.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)), allow: map[string]bool{}}
	f.c = fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&apiv1.McpApprovalRequest{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				f.sars++
				ra := sar.Spec.ResourceAttributes
				sar.Status.Allowed = f.allow[sar.Spec.User] && ra.Verb == apiv1.ApproveVerb && ra.Resource == apiv1.ApprovalRequestsResource
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	f.g = &Gate{Client: f.c, Reader: f.c, Clock: f.clk, MaxOpenPerCaller: 2}
	return f
}

func (f *gateFixture) call(op apiv1.Effect, args, ref string) *invocation.GatedCall {
	return &invocation.GatedCall{
		Caller: invocation.Caller{User: "system:serviceaccount:team:agent", UID: "u1", Seed: "uid:u1"},
		Target: invocation.Target{Namespace: "team", Name: "svc"}, Operation: "drop", Effect: op,
		Snapshot: "sha256:" + strings.Repeat("1", 64), Profile: "sha256:" + strings.Repeat("2", 64),
		Arguments: json.RawMessage(args), Approval: invocation.ApprovalHint{Request: ref},
	}
}

func refusalOf(t *testing.T, err error) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("not an approval refusal: %v", err)
	}
	return r
}

// approve writes a decision as user directly (the admission policy is the apiserver's).
func (f *gateFixture) approve(t *testing.T, name, user string, state apiv1.ApprovalState) {
	t.Helper()
	rq := &apiv1.McpApprovalRequest{}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, rq); err != nil {
		t.Fatal(err)
	}
	rq.Status.State = state
	rq.Status.Decision = &apiv1.ApprovalDecision{Approver: user, Time: metav1.NewTime(f.clk.Now()), Reason: "r"}
	if err := f.c.Status().Update(context.Background(), rq); err != nil {
		t.Fatal(err)
	}
}

func TestGateFlow(t *testing.T) {
	f := newGateFixture(t)
	ctx := context.Background()
	// Not required: runs, nothing created.
	if commit, err := f.g.Check(ctx, f.call(apiv1.EffectRead, `{}`, "")); commit != nil || err != nil {
		t.Fatalf("read: %v", err)
	}
	// Required: approval_required naming a request that binds the call.
	_, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"b":2,"a":1}`, ""))
	r := refusalOf(t, err)
	if r.Name != RefusalApprovalRequired || r.Request == "" || r.Namespace != "team" {
		t.Fatalf("refusal %+v", r)
	}
	rq := &apiv1.McpApprovalRequest{}
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: "team", Name: r.Request}, rq); err != nil {
		t.Fatal(err)
	}
	want, _ := snapshot.DescriptorDigest([]byte(`{"a":1,"b":2}`))
	if rq.Spec.ArgumentsDigest != want || rq.Spec.Caller.Username != "system:serviceaccount:team:agent" ||
		rq.Labels[apiv1.ApprovalCallerLabel] != CallerHash("system:serviceaccount:team:agent") ||
		!rq.Spec.ExpiresAt.Equal(&metav1.Time{Time: f.clk.Now().Add(DefaultTTL)}) {
		t.Fatalf("request %+v", rq.Spec)
	}
	name := r.Request
	// Pending, then approved by the caller itself, then by one without approve: refused.
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1,"b":2}`, name)); refusalOf(t, err).Name != RefusalApprovalPending {
		t.Fatalf("pending: %v", err)
	}
	f.approve(t, name, "system:serviceaccount:team:agent", apiv1.ApprovalApproved)
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1,"b":2}`, name)); refusalOf(t, err).Name != RefusalApprovalNotAuthorized {
		t.Fatalf("self-approved: %v", err)
	}
	// A second request, approved by someone the SAR denies, then allows.
	_, err = f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, ""))
	second := refusalOf(t, err).Request
	f.approve(t, second, "alice", apiv1.ApprovalApproved)
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, second)); refusalOf(t, err).Name != RefusalApprovalNotAuthorized {
		t.Fatalf("approver without approve: %v", err)
	}
	f.allow["alice"] = true
	// The limit: two open requests (the self-approved one counts as approved and open).
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"c":1}`, "")); refusalOf(t, err).Name != RefusalApprovalLimit {
		t.Fatalf("limit: %v", err)
	}
	// Mismatches: other arguments, another caller, another snapshot.
	c := f.call(apiv1.EffectDestructive, `{"a":2}`, second)
	if _, err := f.g.Check(ctx, c); refusalOf(t, err).Name != RefusalApprovalMismatch {
		t.Fatalf("other arguments: %v", err)
	}
	c = f.call(apiv1.EffectDestructive, `{"a":1}`, second)
	c.Caller.User = "system:serviceaccount:team:other"
	if _, err := f.g.Check(ctx, c); refusalOf(t, err).Name != RefusalApprovalMismatch {
		t.Fatalf("other caller: %v", err)
	}
	c = f.call(apiv1.EffectDestructive, `{"a":1}`, second)
	c.Snapshot = "sha256:" + strings.Repeat("9", 64)
	if _, err := f.g.Check(ctx, c); refusalOf(t, err).Name != RefusalApprovalMismatch {
		t.Fatalf("other snapshot: %v", err)
	}
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, "apr-missing")); refusalOf(t, err).Name != RefusalApprovalMismatch {
		t.Fatalf("missing request: %v", err)
	}
	// Two replicas check the approved request; both commit: one runs, the other is approval_used.
	c1, err1 := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, second))
	c2, err2 := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, second))
	if err1 != nil || err2 != nil || c1 == nil || c2 == nil {
		t.Fatalf("approved checks: %v, %v", err1, err2)
	}
	if err := c1(ctx); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	if err := c2(ctx); refusalOf(t, err).Name != RefusalApprovalUsed {
		t.Fatalf("second commit: %v, want approval_used", err)
	}
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"a":1}`, second)); refusalOf(t, err).Name != RefusalApprovalUsed {
		t.Fatalf("retry after use: %v", err)
	}
	// Expiry: a request approved but past its expiry, and a commit that comes after the expiry.
	f.g.MaxOpenPerCaller = 10
	_, err = f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"e":1}`, ""))
	third := refusalOf(t, err).Request
	f.approve(t, third, "alice", apiv1.ApprovalApproved)
	commit, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"e":1}`, third))
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Step(DefaultTTL)
	if err := commit(ctx); refusalOf(t, err).Name != RefusalApprovalExpired {
		t.Fatalf("commit after expiry: %v", err)
	}
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"e":1}`, third)); refusalOf(t, err).Name != RefusalApprovalExpired {
		t.Fatalf("expired: %v", err)
	}
	// Denied.
	_, err = f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"d":1}`, ""))
	fourth := refusalOf(t, err).Request
	f.approve(t, fourth, "alice", apiv1.ApprovalDenied)
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"d":1}`, fourth)); refusalOf(t, err).Name != RefusalApprovalDenied {
		t.Fatalf("denied: %v", err)
	}
	// Arguments without a canonical form cannot be bound.
	if _, err := f.g.Check(ctx, f.call(apiv1.EffectDestructive, `{"n":9007199254740993}`, "")); refusalOf(t, err).Name != RefusalApprovalArguments {
		t.Fatalf("unsafe number: %v", err)
	}
}

func TestGateTTLCeilingAndFloor(t *testing.T) {
	f := newGateFixture(t)
	ctx := context.Background()
	f.g.MaxTTL = time.Hour
	c := f.call(apiv1.EffectDestructive, `{}`, "")
	c.Approval.TTL = 48 * time.Hour
	_, err := f.g.Check(ctx, c)
	rq := &apiv1.McpApprovalRequest{}
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: "team", Name: refusalOf(t, err).Request}, rq); err != nil {
		t.Fatal(err)
	}
	if got := rq.Spec.ExpiresAt.Sub(f.clk.Now()); got != time.Hour {
		t.Fatalf("expiry %s beyond the ceiling", got)
	}
	// The floor: destructive with None requires approval once a policy says so; its failure
	// refuses (fails closed).
	c = f.call(apiv1.EffectDestructive, `{}`, "")
	c.Mode = apiv1.ApprovalNone
	if commit, err := f.g.Check(ctx, c); commit != nil || err != nil {
		t.Fatalf("None without a floor: %v", err)
	}
	f.g.Floor = func(context.Context, string) (bool, error) { return true, nil }
	if _, err := f.g.Check(ctx, c); refusalOf(t, err).Name != RefusalApprovalRequired {
		t.Fatalf("None under the floor: %v", err)
	}
	f.g.Floor = func(context.Context, string) (bool, error) { return false, errors.New("cache down") }
	if _, err := f.g.Check(ctx, c); refusalOf(t, err).Name != RefusalApprovalUnavailable {
		t.Fatalf("floor unreadable: %v", err)
	}
	// A read operation does not even ask for the floor.
	if commit, err := f.g.Check(ctx, f.call(apiv1.EffectRead, `{}`, "")); commit != nil || err != nil {
		t.Fatalf("read under an unreadable floor: %v", err)
	}
}

func TestRefusalErrorCarriesNoArguments(t *testing.T) {
	f := newGateFixture(t)
	_, err := f.g.Check(context.Background(), f.call(apiv1.EffectDestructive, `{"secret":"s3cr3t-value"}`, ""))
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), RefusalApprovalRequired) {
		t.Fatalf("error %v", err)
	}
}
