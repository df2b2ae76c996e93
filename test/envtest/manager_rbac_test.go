package envtest

// The manager runs under exactly the chart's ServiceAccount and RBAC, with leader election on as
// in production, and does its whole job without a single forbidden request.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/oauthtest"
)

// forbiddenLog records every 403 answer the apiserver gives a rest.Config's requests.
type forbiddenLog struct {
	mu   sync.Mutex
	seen []string
}

type forbiddenRecorder struct {
	log  *forbiddenLog
	next http.RoundTripper
}

// RoundTrip records authorization denials. A 403 whose Status message is not an authorization
// decision (the namespace lifecycle plugin refusing writes into a terminating namespace, which
// envtest's namespaces left by other tests stay in forever) is not a missing permission.
func (r forbiddenRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte("because it is being terminated")) {
		r.log.mu.Lock()
		r.log.seen = append(r.log.seen, req.Method+" "+req.URL.Path)
		r.log.mu.Unlock()
	}
	return resp, nil
}

func (l *forbiddenLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// installChartRBAC creates, for real, the ServiceAccount and RBAC objects the chart renders for a
// release named after ns (edit may change them first) and returns the ServiceAccount's name.
func installChartRBAC(t *testing.T, ns string, edit func(*unstructured.Unstructured)) string {
	t.Helper()
	var sa string
	for _, o := range objects(t, render(t, ns, ns, nil)) {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if o.GetKind() == "ServiceAccount" {
			sa = o.GetName()
		}
		if edit != nil {
			edit(o)
		}
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetNamespace() == "" {
			t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
		}
	}
	if sa == "" {
		t.Fatal("the chart renders no ServiceAccount")
	}
	return sa
}

// startChartManager starts the manager as main.go does (cluster-wide cache, leader election in
// ns), authenticated as ns/sa, and returns the log of forbidden requests.
func startChartManager(t *testing.T, ns, sa string) *forbiddenLog {
	t.Helper()
	log := &forbiddenLog{}
	asSA := rest.CopyConfig(cfg)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	asSA.Wrap(func(rt http.RoundTripper) http.RoundTripper { return forbiddenRecorder{log: log, next: rt} })
	shutdown := 5 * time.Second
	mgr, err := ctrl.NewManager(asSA, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "connector-mcp.connectors.b10x.io",
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                         cache.Options{ByObject: appoptions.CacheByObject()}, // as cmd/manager
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if _, err := managerapp.Setup(mgr, devOptions(), false); err != nil {
		t.Fatalf("setup: %v", err)
	}
	runManager(t, mgr)
	return log
}

// waitLeaderEvent waits for the leader elector's core event in ns.
func waitLeaderEvent(t *testing.T, ns string) {
	t.Helper()
	if !pollUntil(200*time.Millisecond, storyTimeout, func() bool {
		evs := &corev1.EventList{}
		if err := k8sClient.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return e.Reason == "LeaderElection" })
	}) {
		t.Fatalf("no LeaderElection core event in %s", ns)
	}
}

// TestManagerRunsUnderChartRBAC: leader election (its Lease and its core event), profile
// verification, grant checks, the credential Secret read by name, the freeze, activation and the
// events, all as the chart's ServiceAccount, and not one 403.
func TestManagerRunsUnderChartRBAC(t *testing.T) {
	ns := newNamespace(t, "chart-rbac")
	sa := installChartRBAC(t, ns, nil)
	// The chart's admission policy too: the producer's writes below (target Secret, rotated
	// refresh token) are all to Secrets its McpCredential controls.
	installSecretWritesPolicy(t, ns)
	forbidden := startChartManager(t, ns, sa)
	waitLeaderEvent(t, ns)

	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	// This manager's cache is cluster-wide, as in production, so it sees the deployments other
	// tests left behind: claim a Connection and a provider nobody else holds.
	doc.Service.Ref, doc.Service.ConnectionRef = ns, ns
	makeGrant(t, ns, "all")
	mustCreate(t, newSecret(ns, "tok", "token", "v1"))
	cred := &apiv1.CredentialRef{Name: "tok", Key: "token"}
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", ns, live.URL, doc, cred, "all")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "Ready under the chart's RBAC", isReady[*apiv1.ServiceDeployment])
	waitEvent(t, ns, "svc", "Normal/Activated")

	// Re-verify requests under the same RBAC: the manager re-freezes the deployment a request
	// names and deletes the request once satisfied, and deletes one that names no deployment
	// (mcpreverifyrequests get, list, watch, delete).
	for _, name := range []string{"svc", "no-such-deployment"} {
		mustCreate(t, &apiv1.McpReverifyRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "reverify-"},
			Spec: apiv1.McpReverifyRequestSpec{DeploymentName: name, Reason: "RBACStory"}})
	}
	eventually(t, storyTimeout, "the chart's manager deleted both McpReverifyRequests", func() error {
		var l apiv1.McpReverifyRequestList
		if err := k8sClient.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return errString(fmt.Sprintf("%d request(s) remain", len(l.Items)))
		}
		return nil
	})

	// The approval lifecycle under the same RBAC: a request past its expiry is marked Expired
	// and announced (mcpapprovalrequests get, list, watch; status update; the event).
	d := "sha256:" + strings.Repeat("e", 64)
	rq := &apiv1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "expiring"},
		Spec: apiv1.McpApprovalRequestSpec{DeploymentName: "svc", Operation: "echo", Effect: apiv1.EffectDestructive,
			Caller: apiv1.ApprovalCaller{Username: "system:serviceaccount:" + ns + ":agent"}, SnapshotDigest: d, ProfileDigest: d,
			ArgumentsDigest: d, ExpiresAt: metav1.NewTime(time.Now().Add(2 * time.Second))}}
	mustCreate(t, rq)
	waitObj(t, rq, storyTimeout, "Expired and announced by the chart's manager", func(r *apiv1.McpApprovalRequest) bool {
		return r.Status.State == apiv1.ApprovalExpired && r.Status.AnnouncedState == apiv1.ApprovalExpired
	})

	// The OAuth producer under the same RBAC: it reads the refresh-token Secret, creates the
	// target Secret, persists the rotated refresh token and updates the target on the next
	// refresh (the token is due 3 s after issue with the default 5 min skew).
	as := oauthtest.NewAuthServer(t, oauthtest.Config{AccessTokenTTL: controllers.DefaultCredentialRefreshSkew + 3*time.Second,
		Preregistered: map[string]string{"connector-mcp": "rbac-client-secret"}})
	rs := oauthtest.NewResourceServer(t, as)
	allowIssuers(t, ns, as.Issuer)
	workstationLogin(t, rs, ns, "oauth", "connector-mcp", "rbac-client-secret", []string{oauthtest.BaseScope})
	mc := waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth"}}, storyTimeout, "Ready under the chart's RBAC", isReady[*apiv1.McpCredential])
	first, _ := targetToken(t, ns, "oauth")
	eventually(t, storyTimeout, "the target Secret updated by a refresh", func() error {
		if tok, _ := targetToken(t, ns, "oauth"); tok == first || tok == "" {
			return errString("not refreshed yet")
		}
		return nil
	})
	waitEvent(t, ns, mc.Name, "Normal/"+apiv1.ReasonTokenFresh)
	if f := forbidden.list(); len(f) > 0 {
		t.Errorf("the manager was refused %d request(s) under the chart's RBAC: %v", len(f), f)
	}
}

// TestManagerRBACGapIsCaught is the twin: with the leader-election Role of before (events only in
// events.k8s.io) the leader elector's core event is refused, and the recorder sees that 403.
func TestManagerRBACGapIsCaught(t *testing.T) {
	ns := newNamespace(t, "chart-rbac-gap")
	sa := installChartRBAC(t, ns, func(o *unstructured.Unstructured) {
		if o.GetKind() != "Role" {
			return
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			if strings.Contains(fmt.Sprint(rule["resources"]), "events") {
				rule["apiGroups"] = []any{"events.k8s.io"}
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
	})
	forbidden := startChartManager(t, ns, sa)
	want := "POST /api/v1/namespaces/" + ns + "/events"
	if !pollUntil(200*time.Millisecond, storyTimeout, func() bool { return slices.Contains(forbidden.list(), want) }) {
		t.Fatalf("no 403 on %q recorded; forbidden requests: %v", want, forbidden.list())
	}
}

// TestCredentialProducerRBACGapIsCaught is the producer's twin: with the Secret rule of before
// the producer (read-only Secrets) the target Secret's creation is refused, and the recorder sees
// that 403.
func TestCredentialProducerRBACGapIsCaught(t *testing.T) {
	ns := newNamespace(t, "chart-rbac-cred-gap")
	sa := installChartRBAC(t, ns, func(o *unstructured.Unstructured) {
		if o.GetKind() != "ClusterRole" {
			return
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			if fmt.Sprint(rule["resources"]) == "[secrets]" {
				rule["verbs"] = []any{"get", "list", "watch"}
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, rules, "rules")
	})
	forbidden := startChartManager(t, ns, sa)
	as := oauthtest.NewAuthServer(t, oauthtest.Config{Preregistered: map[string]string{"connector-mcp": "rbac-client-secret"}})
	rs := oauthtest.NewResourceServer(t, as)
	allowIssuers(t, ns, as.Issuer)
	workstationLogin(t, rs, ns, "oauth", "connector-mcp", "rbac-client-secret", []string{oauthtest.BaseScope})
	want := "PUT /api/v1/namespaces/" + ns + "/secrets/oauth-oauth"
	if !pollUntil(200*time.Millisecond, storyTimeout, func() bool { return slices.Contains(forbidden.list(), want) }) {
		t.Fatalf("no 403 on %q recorded; forbidden requests: %v", want, forbidden.list())
	}
}
