package envtest

// The approval story (docs/approval.md): a destructive operation runs only after someone allowed
// to approve it has approved that exact call, and then exactly once, even across two gateway
// replicas. The real manager and two real gateways (under the gateway's generated ClusterRole)
// run against a real apiserver with the approval-decisions admission policy of
// config/gateway/approval_policy.yaml; a counting upstream proves that nothing reaches it when a
// call is refused.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/approval"
	gwapp "github.com/b10x/connector-mcp/internal/gatewayapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/snapshot"
)

// toolCalls counts the tools/call requests an upstream receives, by tool name.
type toolCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *toolCalls) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// countCalls wraps h, counting its tools/call requests by tool name.
func countCalls(h http.Handler) (http.Handler, *toolCalls) {
	c := &toolCalls{n: map[string]int{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			c.mu.Lock()
			c.n[m.Params.Name]++
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}), c
}

// approvalRefusal is the data of an approval refusal.
type approvalRefusal struct {
	Refusal   string `json:"refusal"`
	Approval  string `json:"approval"`
	Namespace string `json:"namespace"`
	Hint      string `json:"hint"`
}

func refusalData(err error) approvalRefusal {
	var we *jsonrpc.Error
	var d approvalRefusal
	if errors.As(err, &we) {
		_ = json.Unmarshal(we.Data, &d)
	}
	return d
}

// callWith calls tool with args and, when name is set, the approval request name in _meta.
func callWith(cs *mcp.ClientSession, tool string, args any, meta mcp.Meta) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args})
}

func retryMeta(name string) mcp.Meta { return mcp.Meta{apiv1.ApprovalMetaKey: name} }

// installApprovalPolicy creates config/gateway/approval_policy.yaml with the gateway user name of
// this story, waits until the apiserver enforces it, and removes it at the end.
func installApprovalPolicy(t *testing.T, ns, gatewayUser string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "approval_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(raw), "system:serviceaccount:connector-mcp-system:connector-mcp-gateway", gatewayUser)
	docs := strings.Split(src, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("approval_policy.yaml: %d documents, want the policy and its binding", len(docs))
	}
	pol, bind := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), pol); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), bind); err != nil {
		t.Fatal(err)
	}
	pol.Name, bind.Name, bind.Spec.PolicyName = ns+"-approval", ns+"-approval", ns+"-approval"
	mustCreate(t, pol)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pol) })
	mustCreate(t, bind)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), bind) })
	// Enforced once the admin's own create of a request is refused (only the gateway creates).
	probe := func() *apiv1.McpApprovalRequest {
		return &apiv1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec: apiv1.McpApprovalRequestSpec{DeploymentName: "x", Operation: "x", Effect: apiv1.EffectDestructive,
				Caller: apiv1.ApprovalCaller{Username: "u"}, SnapshotDigest: "sha256:" + strings.Repeat("0", 64),
				ProfileDigest: "sha256:" + strings.Repeat("0", 64), ArgumentsDigest: "sha256:" + strings.Repeat("0", 64),
				ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour))}}
	}
	eventually(t, storyTimeout, "approval policy enforced", func() error {
		p := probe()
		err := k8sClient.Create(context.Background(), p)
		if err == nil {
			_ = k8sClient.Delete(context.Background(), p)
			return errors.New("an admin created a request")
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return err
		}
		if !strings.Contains(err.Error(), "approval_create_forbidden") {
			return err
		}
		return nil
	})
}

// impersonate returns a client acting as ServiceAccount ns/sa.
func impersonate(t *testing.T, ns, sa string) client.Client {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// decideAs approves (or denies) request name as ServiceAccount sa, as mcpctl approve does.
func decideAs(t *testing.T, ns, sa, name string, approve bool, reason string) error {
	t.Helper()
	c := impersonate(t, ns, sa)
	who, err := approval.WhoAmI(context.Background(), c)
	if err != nil {
		t.Fatalf("WhoAmI as %s: %v", sa, err)
	}
	_, err = approval.Decide(context.Background(), c, types.NamespacedName{Namespace: ns, Name: name}, approve, reason, who, time.Now())
	return err
}

func bindRole(t *testing.T, ns, name, role string, sas ...string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
	for _, sa := range sas {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: sa})
	}
	mustCreate(t, rb)
}

func TestStoryApproval(t *testing.T) {
	ns := newNamespace(t, "story-approval")
	startOperator(t, ns, devOptions())
	for _, sa := range []string{"agent", "stranger", "approver", "nobody"} {
		mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	// The upstream: echo is reviewed destructive (approval by default), add destructive but bound
	// approval: None, read_file read.
	_, h := modernServer(mcptest.DefaultTools())
	counted, calls := countCalls(h)
	up := startSwitchable(t, counted)
	doc := reviewedProfile(t, up.URL)
	for i := range doc.Operations {
		switch doc.Operations[i].RemoteName {
		case "echo", "add":
			doc.Operations[i].Effect = apiv1.EffectDestructive
		}
	}
	makeGrant(t, ns, "agents-invoke", "svc")
	rb := &rbacv1.RoleBinding{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "agents-invoke"}, rb); err != nil {
		t.Fatal(err)
	}
	mutate(t, rb, func(rb *rbacv1.RoleBinding) {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "stranger", Namespace: ns})
	})
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", up.URL, doc, nil, "agents-invoke")
	for i := range sd.Spec.Operations {
		if sd.Spec.Operations[i].OperationRef == "add" {
			sd.Spec.Operations[i].Approval = apiv1.ApprovalNone
		}
	}
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])

	// Approvers: the approver ClusterRole of config/gateway/rbac/approver_role.yaml, bound to
	// "approver" and (to show the self-approval rule is the admission policy's, not RBAC's) to
	// the agent itself. "nobody" may write the status but lacks the verb approve.
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "rbac", "approver_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	approverRole := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(raw, approverRole); err != nil {
		t.Fatal(err)
	}
	approverRole.Name = ns + "-approver"
	mustCreate(t, approverRole)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), approverRole) })
	bindRole(t, ns, "approvers", approverRole.Name, "approver", "agent")
	statusOnly := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-status-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"mcpapprovalrequests"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"mcpapprovalrequests/status"}, Verbs: []string{"update", "patch"}}}}
	mustCreate(t, statusOnly)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), statusOnly) })
	bindRole(t, ns, "status-writers", statusOnly.Name, "nobody")

	// Two gateway replicas under the gateway's generated ClusterRole, and the admission policy.
	gwCfg := asGatewayWithRole(t, ns, gatewayRole(t))
	installApprovalPolicy(t, ns, gwCfg.Impersonate.UserName)
	o := gatewayOptions()
	o.ApprovalTTL = 10 * time.Minute
	baseA, wA, logsA := startGatewayAs(t, gwCfg, ns, o)
	baseB, wB, _ := startGatewayAs(t, gwCfg, ns, o)
	route := "/mcp/" + ns + "/svc"
	agent := mintToken(t, ns, "agent", "connector-mcp")
	stranger := mintToken(t, ns, "stranger", "connector-mcp")
	agentA, err := mcpConnect(t, baseA+route, agent, "")
	if err != nil {
		t.Fatal(err)
	}
	agentB, err := mcpConnect(t, baseB+route, agent, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range []*mcp.ClientSession{agentA, agentB} {
		eventually(t, storyTimeout, "both gateways serve svc", func() error { _, err := listTools(cs); return err })
	}

	// 1. A destructive call: approval_required with the request's name and a retry hint; the
	// upstream receives no tools/call.
	args := map[string]any{"text": "drop table customers"}
	_, err = callWith(agentA, "echo", args, nil)
	d := refusalData(err)
	if refusedName(err) != approval.RefusalApprovalRequired || d.Approval == "" || d.Namespace != ns || !strings.Contains(d.Hint, apiv1.ApprovalMetaKey) {
		t.Fatalf("destructive call: %v (data %+v), want approval_required naming a request", err, d)
	}
	if n := calls.get("echo"); n != 0 {
		t.Fatalf("the upstream received %d echo calls before any approval", n)
	}
	first := d.Approval
	rq := &apiv1.McpApprovalRequest{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: first}, rq); err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := snapshot.DescriptorDigest([]byte(`{"text":"drop table customers"}`))
	if rq.Spec.Caller.Username != "system:serviceaccount:"+ns+":agent" || rq.Spec.Operation != "echo" || rq.Spec.DeploymentName != "svc" ||
		rq.Spec.ArgumentsDigest != wantDigest || rq.Spec.SnapshotDigest != doc.Snapshot.Digest || rq.Status.State != apiv1.ApprovalPending ||
		len(rq.Spec.Preview) != 1 || rq.Spec.Preview[0].Value != `"drop table customers"` || !rq.Spec.ExpiresAt.After(time.Now().Add(9*time.Minute)) {
		t.Fatalf("the request does not bind the call: %+v", rq)
	}

	// 2. Before a decision, the retry is approval_pending.
	if _, err := callWith(agentA, "echo", args, retryMeta(first)); refusedName(err) != approval.RefusalApprovalPending {
		t.Fatalf("retry before approval: %v, want approval_pending", err)
	}
	// 3. Nobody without approve, the caller itself, and an approver writing another identity are
	// all refused by the apiserver.
	if err := decideAs(t, ns, "nobody", first, true, ""); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(fmt.Sprint(err), "approval_not_allowed") {
		t.Fatalf("approval by a ServiceAccount without approve: %v, want approval_not_allowed", err)
	}
	if err := decideAs(t, ns, "agent", first, true, ""); err == nil || !strings.Contains(err.Error(), "approval_self") {
		t.Fatalf("approval by the caller itself: %v, want approval_self", err)
	}
	forger := impersonate(t, ns, "approver")
	if _, err := approval.Decide(context.Background(), forger, types.NamespacedName{Namespace: ns, Name: first}, true, "",
		approval.Identity{Username: "system:serviceaccount:" + ns + ":someone-else"}, time.Now()); err == nil || !strings.Contains(err.Error(), "approval_identity") {
		t.Fatalf("approval recording another identity: %v, want approval_identity", err)
	}
	if n := calls.get("echo"); n != 0 {
		t.Fatalf("the upstream received %d echo calls", n)
	}

	// 4. The approver approves; the decision records its identity.
	if err := decideAs(t, ns, "approver", first, true, "change ticket 42"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: first}, rq); err != nil {
		t.Fatal(err)
	}
	if rq.Status.State != apiv1.ApprovalApproved || rq.Status.Decision == nil || rq.Status.Decision.Approver != "system:serviceaccount:"+ns+":approver" {
		t.Fatalf("approved request: %+v", rq.Status)
	}

	// 5. Retries race on both replicas: exactly one runs, the others are approval_used.
	var ok, used atomic.Int32
	var wg sync.WaitGroup
	var others sync.Map
	for i := range 6 {
		cs := agentA
		if i%2 == 1 {
			cs = agentB
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := callWith(cs, "echo", args, retryMeta(first))
			switch {
			case err == nil && !res.IsError && strings.Contains(textOf(res), "drop table customers"):
				ok.Add(1)
			case refusedName(err) == approval.RefusalApprovalUsed:
				used.Add(1)
			default:
				others.Store(i, fmt.Sprint(err))
			}
		}()
	}
	wg.Wait()
	others.Range(func(k, v any) bool { t.Errorf("racing retry %v: %v", k, v); return true })
	if ok.Load() != 1 || used.Load() != 5 || calls.get("echo") != 1 {
		t.Fatalf("racing retries: %d ran, %d approval_used, upstream saw %d echo calls; want exactly one", ok.Load(), used.Load(), calls.get("echo"))
	}
	// 6. A later retry: approval_used, nothing sent.
	if _, err := callWith(agentB, "echo", args, retryMeta(first)); refusedName(err) != approval.RefusalApprovalUsed || calls.get("echo") != 1 {
		t.Fatalf("second retry: %v (upstream %d), want approval_used", err, calls.get("echo"))
	}

	// newApproved creates a request for args as the agent and has it approved.
	newApproved := func(args map[string]any, meta mcp.Meta) string {
		t.Helper()
		_, err := callWith(agentA, "echo", args, meta)
		name := refusalData(err).Approval
		if refusedName(err) != approval.RefusalApprovalRequired || name == "" {
			t.Fatalf("call: %v, want approval_required", err)
		}
		if err := decideAs(t, ns, "approver", name, true, ""); err != nil {
			t.Fatalf("approve %s: %v", name, err)
		}
		return name
	}
	// 7. A changed argument and another caller: approval_mismatch, nothing sent.
	second := newApproved(map[string]any{"text": "A"}, nil)
	if _, err := callWith(agentA, "echo", map[string]any{"text": "B"}, retryMeta(second)); refusedName(err) != approval.RefusalApprovalMismatch {
		t.Fatalf("changed argument: %v, want approval_mismatch", err)
	}
	strangerCS, err := mcpConnect(t, baseA+route, stranger, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := callWith(strangerCS, "echo", map[string]any{"text": "A"}, retryMeta(second)); refusedName(err) != approval.RefusalApprovalMismatch {
		t.Fatalf("another caller: %v, want approval_mismatch", err)
	}
	// The same call on the legacy era (the go-sdk server path, not the direct one) runs.
	legacyCS, err := mcpConnect(t, baseB+route, agent, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := callWith(legacyCS, "echo", map[string]any{"text": "A"}, retryMeta(second)); err != nil || !strings.Contains(textOf(res), "A") {
		t.Fatalf("approved retry over 2025-11-25: %v", err)
	}
	if calls.get("echo") != 2 {
		t.Fatalf("upstream saw %d echo calls, want 2", calls.get("echo"))
	}

	// The meta route (the go-sdk server path): invoke_operation creates a request too, and its
	// approval argument names the approved one.
	meta, err := mcpConnect(t, baseA+"/mcp", agent, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := callTool(meta, "describe_operation", map[string]any{"namespace": ns, "deployment": "svc", "operation": "echo"})
	if err != nil {
		t.Fatal(err)
	}
	var desc struct {
		Lease string `json:"lease"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &desc); err != nil {
		t.Fatal(err)
	}
	invoke := map[string]any{"namespace": ns, "deployment": "svc", "operation": "echo", "lease": desc.Lease, "arguments": map[string]any{"text": "M"}}
	_, err = callTool(meta, "invoke_operation", invoke)
	viaMeta := refusalData(err).Approval
	if refusedName(err) != approval.RefusalApprovalRequired || viaMeta == "" {
		t.Fatalf("invoke_operation: %v, want approval_required", err)
	}
	if err := decideAs(t, ns, "approver", viaMeta, true, ""); err != nil {
		t.Fatal(err)
	}
	invoke["approval"] = viaMeta
	if res, err := callTool(meta, "invoke_operation", invoke); err != nil || !strings.Contains(textOf(res), "M") {
		t.Fatalf("approved invoke_operation: %v", err)
	}
	if _, err := callTool(meta, "invoke_operation", invoke); refusedName(err) != approval.RefusalApprovalUsed {
		t.Fatalf("second invoke_operation: %v, want approval_used", err)
	}
	if calls.get("echo") != 3 {
		t.Fatalf("upstream saw %d echo calls, want 3", calls.get("echo"))
	}

	// 8. A denied request: approval_denied.
	_, err = callWith(agentA, "echo", map[string]any{"text": "C"}, nil)
	third := refusalData(err).Approval
	if err := decideAs(t, ns, "approver", third, false, ""); err == nil {
		t.Fatal("a denial without a reason was accepted")
	}
	if err := decideAs(t, ns, "approver", third, false, "not during business hours"); err != nil {
		t.Fatalf("deny: %v", err)
	}
	if _, err := callWith(agentA, "echo", map[string]any{"text": "C"}, retryMeta(third)); refusedName(err) != approval.RefusalApprovalDenied {
		t.Fatalf("denied: %v, want approval_denied", err)
	}
	// 9. An expired request (the caller asked for 1 s): approval_expired; the manager marks it.
	fourth := newApproved(map[string]any{"text": "D"}, mcp.Meta{"connectors.b10x.io/approval-ttl-seconds": 1})
	time.Sleep(1500 * time.Millisecond)
	if _, err := callWith(agentA, "echo", map[string]any{"text": "D"}, retryMeta(fourth)); refusedName(err) != approval.RefusalApprovalExpired {
		t.Fatalf("expired: %v, want approval_expired", err)
	}
	waitObj(t, &apiv1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fourth}}, storyTimeout, "Expired",
		func(r *apiv1.McpApprovalRequest) bool { return r.Status.State == apiv1.ApprovalExpired })
	if calls.get("echo") != 3 {
		t.Fatalf("upstream saw %d echo calls, want 3", calls.get("echo"))
	}

	// 10. A read operation is unaffected, and so is add (destructive, approval: None)...
	if res, err := callWith(agentA, "read_file", map[string]any{"path": "/x"}, nil); err != nil || res == nil {
		t.Fatalf("read operation: %v", err)
	}
	if _, err := callWith(agentA, "add", map[string]any{"a": 1, "b": 2}, nil); err != nil || calls.get("add") != 1 {
		t.Fatalf("add with approval None: %v", err)
	}
	// ...until an McpTrustPolicy makes approval a floor for the namespace's destructive operations.
	tp := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-approval-floor"}, Spec: apiv1.McpTrustPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Approval:          apiv1.TrustApprovalFloor{RequireForDestructive: true}}}
	mustCreate(t, tp)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tp) })
	eventually(t, storyTimeout, "the floor applies", func() error {
		_, err := callWith(agentA, "add", map[string]any{"a": 1, "b": 2}, nil)
		if refusedName(err) != approval.RefusalApprovalRequired {
			return fmt.Errorf("add: %w", err)
		}
		return nil
	})
	// (Calls before the gateway's cache saw the policy ran; from the first refusal on, none do.)
	floored := calls.get("add")
	if _, err := callWith(agentA, "add", map[string]any{"a": 1, "b": 2}, nil); refusedName(err) != approval.RefusalApprovalRequired || calls.get("add") != floored {
		t.Fatalf("add under the floor: %v, upstream add calls %d → %d", err, floored, calls.get("add"))
	}
	if _, err := callWith(agentA, "read_file", map[string]any{"path": "/x"}, nil); err != nil {
		t.Fatalf("read operation under the floor: %v", err)
	}

	// 11. A re-reviewed profile (a new profile digest over the same snapshot) makes an approved
	// request unusable.
	fifth := newApproved(map[string]any{"text": "E"}, nil)
	prof := &apiv1.McpServiceProfile{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "svc"}, prof); err != nil {
		t.Fatal(err)
	}
	oldProfile := wA.Registry.Surfaces()[0].ProfileDigest()
	mutate(t, prof, func(p *apiv1.McpServiceProfile) {
		for i := range p.Spec.Source.Inline.Operations {
			if p.Spec.Source.Inline.Operations[i].RemoteName == "echo" {
				p.Spec.Source.Inline.Operations[i].Title = "Reviewed echo, again"
			}
		}
	})
	for _, w := range []*gwapp.Wired{wA, wB} {
		eventually(t, storyTimeout, "the gateways serve the re-reviewed profile", func() error {
			if ss := w.Registry.Surfaces(); len(ss) != 1 || ss[0].ProfileDigest() == oldProfile {
				return errors.New("old profile still served")
			}
			return nil
		})
	}
	if _, err := callWith(agentA, "echo", map[string]any{"text": "E"}, retryMeta(fifth)); refusedName(err) != approval.RefusalApprovalMismatch {
		t.Fatalf("re-reviewed: %v, want approval_mismatch", err)
	}
	if calls.get("echo") != 3 {
		t.Fatalf("upstream saw %d echo calls, want 3", calls.get("echo"))
	}

	// 12. The manager recorded an Event per state; the audit log has the approval records and no
	// argument value.
	eventually(t, storyTimeout, "Approved and ApprovalUsed events", func() error {
		var evs eventsv1.EventList
		if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Name == first {
				seen[e.Reason] = true
			}
		}
		if !seen["ApprovalRequested"] || !seen["Approved"] || !seen["ApprovalUsed"] {
			return fmt.Errorf("events of %s: %v", first, seen)
		}
		return nil
	})
	logs := logsA.text()
	if !strings.Contains(logs, `"event"="requested"`) || !strings.Contains(logs, `"event"="used"`) && !strings.Contains(logs, `"event"="approval_used"`) {
		t.Fatalf("audit log lacks the approval records:\n%s", logs)
	}
	if strings.Contains(logs, "drop table customers") {
		t.Fatal("an argument value reached the gateway log")
	}
	// The metric's events, summed over both replicas: three approved calls ran; five racing
	// retries, one later retry and one meta retry were refused approval_used.
	sum := func(event string) float64 {
		return testutil.ToFloat64(wA.Metrics.Approvals.WithLabelValues(event)) + testutil.ToFloat64(wB.Metrics.Approvals.WithLabelValues(event))
	}
	if sum("requested") < 6 || sum("used") != 3 || sum(approval.RefusalApprovalUsed) != 7 || sum(approval.RefusalApprovalMismatch) != 3 {
		t.Fatalf("approval metrics: requested %v, used %v, approval_used %v, approval_mismatch %v",
			sum("requested"), sum("used"), sum(approval.RefusalApprovalUsed), sum(approval.RefusalApprovalMismatch))
	}
}
