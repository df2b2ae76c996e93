package envtest

// Story, end to end: the operator (wired exactly as cmd/manager wires it) activates a reviewed
// profile against a live server; a gateway builds the invocation surface from the resolved
// document and the activated deployment, and an agent granted "invoke" calls a tool. The server
// then changes a tool: the surface refuses the drift at once, the operator deactivates the
// deployment (fail closed: no surface can be built), and a newly reviewed profile re-activates it,
// where the old lease is stale and a new one works.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestStoryOperatorActivatesGatewayInvokes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "invoke-e2e")
	wired := startOperator(t, ns)

	// A live server at a stable URL whose tools can change.
	live := &switchable{}
	live.set(mcptest.HTTPHandler(mcptest.NewServer("demo", mcptest.DefaultTools()), mcptest.Modern))
	ts := httptest.NewServer(live)
	t.Cleanup(ts.Close)
	url := ts.URL + "/mcp"

	doc := reviewedProfile(t, url)
	doc.Service = apiv1.ServiceIdentity{Ref: "demo", ConnectionRef: "demo"}
	profile := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{Inline: doc.DeepCopy()}}}
	create(t, profile)
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoke-demo"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"connectors.b10x.io"}, Resources: []string{"servicedeployments"},
			ResourceNames: []string{"demo"}, Verbs: []string{"invoke"}}}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents-invoke-demo"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "invoke-demo"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "agent"}}})
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: "demo"}, ProviderID: "demo",
			MCPConnection: apiv1.MCPConnection{URL: url}}}
	for _, o := range doc.Operations {
		sd.Spec.Operations = append(sd.Spec.Operations, apiv1.OperationBinding{OperationRef: o.OperationRef,
			EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{"agents-invoke-demo"}, Expose: o.OperationRef != "read_file"})
	}
	create(t, sd)
	key := types.NamespacedName{Namespace: ns, Name: "demo"}
	waitDeployment(t, key, "Ready", func(d *apiv1.ServiceDeployment) bool {
		return meta.IsStatusConditionTrue(d.Status.Conditions, "Ready") && d.Status.ObservedGeneration == d.Generation
	})

	// The gateway: the verified document from the operator's resolver (cached, no new
	// verification), the activated deployment, the apiserver as authorizer.
	opts := invocation.Options{
		Connector:     &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer:    &invocation.SubjectAccessReviewer{Client: k8sClient},
		Schemas:       invocation.NewSchemaCache(),
		MaxSessionAge: -1, // every call connects and re-checks the live list
	}
	surfaceNow := func() (*invocation.Surface, error) {
		p := &apiv1.McpServiceProfile{}
		if err := k8sClient.Get(ctx, key, p); err != nil {
			t.Fatal(err)
		}
		res, serr := wired.Deployments.Resolver.Resolve(ctx, p)
		if serr != nil {
			t.Fatalf("resolve: %v", serr)
		}
		d := &apiv1.ServiceDeployment{}
		if err := k8sClient.Get(ctx, key, d); err != nil {
			t.Fatal(err)
		}
		return invocation.NewSurface(res.Document, d, opts)
	}
	s, err := surfaceNow()
	if err != nil {
		t.Fatal(err)
	}
	agent := invocation.Caller{User: "system:serviceaccount:" + ns + ":agent", Seed: "serviceaccount:" + ns + "/agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	d, err := s.Describe(ctx, agent, "add", "demo")
	if err != nil {
		t.Fatal(err)
	}
	add := func(s *invocation.Surface, lease string) (*invocation.Result, error) {
		return s.Invoke(ctx, invocation.Request{Caller: agent, Lease: lease, Operation: "add", Connection: "demo", Arguments: json.RawMessage(`{"a":40,"b":2}`)})
	}
	if res, err := add(s, d.Lease); err != nil || !json.Valid(res.JSON) {
		t.Fatalf("invoke: %v", err)
	}
	// Not exposed, and another ServiceAccount, are refused.
	if _, err := s.Describe(ctx, agent, "read_file", "demo"); !errors.Is(err, invocation.ErrNotExposed) {
		t.Fatalf("hidden operation: %v", err)
	}
	stranger := invocation.Caller{User: "system:serviceaccount:" + ns + ":stranger", Seed: "serviceaccount:" + ns + "/stranger"}
	if _, err := s.Describe(ctx, stranger, "add", "demo"); !errors.Is(err, invocation.ErrForbidden) {
		t.Fatalf("stranger: %v", err)
	}

	// The server changes a tool. The surface refuses at once; the operator's next re-verification
	// deactivates the deployment and no surface can be built for it.
	changed := append(mcptest.DefaultTools()[:0:0], mcptest.DefaultTools()...)
	changed[1] = &mcp.Tool{Name: "add", Description: "Add two numbers, now differently.", InputSchema: changed[1].InputSchema}
	live.set(mcptest.HTTPHandler(mcptest.NewServer("demo", changed), mcptest.Modern))
	var de *invocation.DriftError
	if _, err := add(s, d.Lease); !errors.As(err, &de) {
		t.Fatalf("after the change: %v", err)
	}
	waitDeployment(t, key, "deactivated on drift", func(d *apiv1.ServiceDeployment) bool {
		return d.Status.ActiveSnapshotDigest == "" && d.Status.CandidateSnapshotDigest == de.Live
	})
	if _, err := surfaceNow(); !errors.Is(err, invocation.ErrNotActive) {
		t.Fatalf("surface of a drifted deployment: %v", err)
	}

	// A newly reviewed profile that matches the live server re-activates; the old lease is
	// stale on the new surface, a new one works.
	doc2 := reviewedProfile(t, url)
	doc2.Service = doc.Service
	p := &apiv1.McpServiceProfile{}
	if err := k8sClient.Get(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Source.Inline = doc2
	if err := k8sClient.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, key, "re-activated", func(d *apiv1.ServiceDeployment) bool {
		return d.Status.ActiveSnapshotDigest == doc2.Snapshot.Digest && meta.IsStatusConditionTrue(d.Status.Conditions, "Ready")
	})
	s2, err := surfaceNow()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := add(s2, d.Lease); !errors.Is(err, invocation.ErrStaleLease) {
		t.Fatalf("old lease on the new activation: %v", err)
	}
	d2, err := s2.Describe(ctx, agent, "add", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := add(s2, d2.Lease); err != nil {
		t.Fatal(err)
	}
}

// startOperator runs a manager scoped to ns, wired by cmd/manager/app with development options
// (inline profiles, loopback), until the test ends.
func startOperator(t *testing.T, ns string) *managerapp.Wired {
	t.Helper()
	o := managerapp.DefaultOptions()
	o.SkipProvenanceUnsafe = true
	o.AllowLoopbackUnsafe = true
	o.RetryInterval = 300 * time.Millisecond
	o.FreezeTimeout, o.ProbeTimeout, o.ExchangeTimeout = 10*time.Second, 3*time.Second, 5*time.Second
	// Periodic re-verification every second finds the drift (DeploymentReconciler.Refresh only
	// enqueues a pass; the pass freezes again only when one is due).
	o.ReverifyInterval, o.ReverifyJitter = time.Second, 0
	shutdown := 5 * time.Second
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: &shutdown,
	})
	if err != nil {
		t.Fatal(err)
	}
	wired, err := managerapp.Setup(mgr, o, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	})
	return wired
}

// waitDeployment polls the deployment until cond holds (30 s at most).
func waitDeployment(t *testing.T, key types.NamespacedName, what string, cond func(*apiv1.ServiceDeployment) bool) {
	t.Helper()
	d := &apiv1.ServiceDeployment{}
	var err error
	if wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		err = k8sClient.Get(context.Background(), key, d)
		return err == nil && cond(d), nil
	}) != nil {
		t.Fatalf("deployment %s: timed out waiting for %s (err %v): %+v", key, what, err, d.Status)
	}
}

// switchable serves the handler set last.
type switchable struct{ h atomic.Pointer[http.Handler] }

func (s *switchable) set(h http.Handler) { s.h.Store(&h) }

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }
