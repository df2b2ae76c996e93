package envtest

// Shared helpers of the operator user stories (*_story_test.go): a manager per test, scoped to
// the test's namespace and wired exactly as cmd/manager wires it (cmd/manager/app), with a
// client that counts the manager's API writes.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/writecount"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

// operator is a running manager for one test namespace.
type operator struct {
	wired *managerapp.Wired
	// mgr is the running manager (Elected() closes when it leads, with leader election on).
	mgr manager.Manager
	// stop stops the manager (idempotent; also run at the end of the test).
	stop   func()
	writes atomic.Int64
	// gets counts the manager's reads of each ServiceDeployment ("ns/name") and McpServiceProfile
	// (profileGetsPrefix+"ns/name"), i.e. reconciles (and, for profiles, lookups by the
	// deployment reconciler).
	mu   sync.Mutex
	gets map[string]int
	// idleBase is, per controller, the work controller-runtime's gauges showed when this manager
	// started: work left in the queues of managers stopped before (their gauges stay as they
	// were at the stop). See waitIdle.
	idleBase map[string]float64
}

// profileGetsPrefix marks an McpServiceProfile's key in operator.gets.
const profileGetsPrefix = "McpServiceProfile/"

func (o *operator) reconciles(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gets[key]
}

// devOptions are the options of a development cluster: inline profiles allowed (the unsafe
// provenance waiver), loopback servers reachable, fast retries.
func devOptions() managerapp.Options {
	o := managerapp.DefaultOptions()
	o.SkipProvenanceUnsafe = true
	o.AllowLoopbackUnsafe = true
	o.RetryInterval = 300 * time.Millisecond
	o.FreezeTimeout = 10 * time.Second
	o.ProbeTimeout = 3 * time.Second
	o.ExchangeTimeout = 5 * time.Second
	o.ReverifyInterval = 0
	// Waiting refusals (docs/concepts.md: a missing grant, a signer no trust source names yet)
	// read Stalled after a second, so the refusal stories see their final state at once; the
	// GitOps bootstrap stories set the production default.
	o.WaitGracePeriod = time.Second
	// Keyless trust defaults to public-good Sigstore's TUF repository, fetched at the first
	// keyless signature: no story may reach it (nothing leaves this machine), only a loopback
	// repository of its own.
	o.BeforeTrustedRootFetch = loopbackTUFOnly
	// The stories' audit trail goes nowhere (a story that checks it sets AuditLogger).
	o.AuditLog = "none"
	return o
}

// loopbackTUFOnly refuses the fetch of a keyless trusted root from any TUF repository off
// loopback (BeforeTrustedRootFetch of the stories' managers).
func loopbackTUFOnly(repoURL string) error {
	if u, err := url.Parse(repoURL); err == nil && ociregistry.IsLoopbackHost(u.Host) {
		return nil
	}
	return errString("a story fetched the keyless trusted root from a repository off loopback")
}

// startOperator starts a manager watching namespace ns with options o. It stops when the test
// ends; the stop must complete within the graceful shutdown timeout.
func startOperator(t testing.TB, ns string, o managerapp.Options) *operator {
	t.Helper()
	return startOperatorAs(t, cfg, ns, o)
}

// startOperatorAs is startOperator with the manager authenticating with restCfg.
func startOperatorAs(t testing.TB, restCfg *rest.Config, ns string, o managerapp.Options) *operator {
	t.Helper()
	return startOperatorIn(t, restCfg, []string{ns}, o)
}

// startOperatorIn is startOperatorAs for a manager watching several namespaces.
func startOperatorIn(t testing.TB, restCfg *rest.Config, namespaces []string, o managerapp.Options) *operator {
	t.Helper()
	return startOperatorWith(t, restCfg, namespaces, o, nil)
}

// startOperatorWith is startOperatorIn with tune, when not nil, adjusting the manager's options
// (leader election, for instance) before the manager is made.
func startOperatorWith(t testing.TB, restCfg *rest.Config, namespaces []string, o managerapp.Options, tune func(*ctrl.Options)) *operator {
	t.Helper()
	watched := map[string]cache.Config{}
	for _, ns := range namespaces {
		watched[ns] = cache.Config{}
	}
	op := &operator{gets: map[string]int{}}
	count := func() { op.writes.Add(1) }
	newClient := func(c *rest.Config, opts client.Options) (client.Client, error) {
		base, err := client.NewWithWatch(c, opts)
		if err != nil {
			return nil, err
		}
		funcs := writecount.Funcs(count)
		funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *apiv1.ServiceDeployment:
				op.mu.Lock()
				op.gets[key.String()]++
				op.mu.Unlock()
			case *apiv1.McpServiceProfile:
				op.mu.Lock()
				op.gets[profileGetsPrefix+key.String()]++
				op.mu.Unlock()
			}
			return c.Get(ctx, key, obj, opts...)
		}
		return interceptor.NewClient(base, funcs), nil
	}
	shutdown := 5 * time.Second
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Cache:                   cacheIn(watched), // as cmd/manager, limited to the test namespaces
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient:               newClient,
		GracefulShutdownTimeout: &shutdown,
	}
	if tune != nil {
		tune(&mgrOpts)
	}
	mgr, err := ctrl.NewManager(restCfg, mgrOpts)
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if op.wired, err = managerapp.Setup(mgr, o, false); err != nil {
		t.Fatalf("setup: %v", err)
	}
	op.mgr = mgr
	op.idleBase = map[string]float64{}
	for _, c := range []string{deploymentController, profileController, credentialController, trustPolicyController} {
		n, _, err := gaugedWork(c)
		if err != nil {
			t.Fatalf("read controller-runtime metrics: %v", err)
		}
		op.idleBase[c] = n
	}
	op.stop = runManager(t, mgr)
	return op
}

// cacheIn is managerapp.CacheOptions (the manager's cache) watching only namespaces.
func cacheIn(namespaces map[string]cache.Config) cache.Options {
	o := managerapp.CacheOptions()
	o.DefaultNamespaces = namespaces
	return o
}

// managerStopBound is how long runManager's stop waits for a cancelled manager: above every
// story's graceful shutdown timeout (restartShutdownGrace is the longest), so a slow stop is
// reported by the manager's own error, with the goroutines still running.
const managerStopBound = 90 * time.Second

// runManager starts mgr and returns a stop function that cancels it and waits (managerStopBound) for
// it to stop cleanly; stop is idempotent and also runs at the end of the test.
func runManager(t testing.TB, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					// The runnable that outlived the grace period is still running: its stack
					// names it.
					t.Errorf("manager stopped with %v; goroutines now:\n%s", err, goroutineStacks())
				}
			case <-time.After(managerStopBound):
				t.Errorf("manager did not stop within %s of cancellation; goroutines now:\n%s", managerStopBound, goroutineStacks())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// switchable is a loopback MCP endpoint whose handler can be swapped at run time (tool changes,
// protocol era changes, hangs), at a stable URL.
type switchable struct {
	URL string
	h   atomic.Pointer[http.Handler]
	ts  *httptest.Server
	// hits counts requests.
	hits atomic.Int64
}

func startSwitchable(t testing.TB, h http.Handler) *switchable {
	t.Helper()
	s := &switchable{}
	s.set(h)
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		(*s.h.Load()).ServeHTTP(w, r)
	}))
	s.URL = s.ts.URL + "/mcp"
	t.Cleanup(s.ts.Close)
	return s
}

func (s *switchable) set(h http.Handler) { s.h.Store(&h) }

// reviewedProfile freezes a live server with mcpclient and turns the draft into a reviewed
// profile document (every effect set by the "reviewer").
func reviewedProfile(t testing.TB, url string) *apiv1.ProfileDocument {
	t.Helper()
	return reviewedProfileVia(t, url, nil)
}

// reviewedProfileVia is reviewedProfile with the HTTP client of the freeze (nil: the default).
func reviewedProfileVia(t testing.TB, url string, hc *http.Client) *apiv1.ProfileDocument {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url, HTTPClient: hc}})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer func() { _ = sess.Close() }()
	snap, err := sess.ListTools(ctx)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	doc := ocipack.Draft(snap)
	doc.Service = apiv1.ServiceIdentity{Ref: "demo", ConnectionRef: "demo"}
	for i := range doc.Operations {
		doc.Operations[i].Effect = apiv1.EffectRead
		doc.Operations[i].Title = "Reviewed " + doc.Operations[i].RemoteName
	}
	if err := ocipack.Validate(doc); err != nil {
		t.Fatalf("reviewed profile does not validate: %v", err)
	}
	return doc
}

func modernServer(tools []*mcp.Tool) (*mcp.Server, http.Handler) {
	srv := mcptest.NewServer("demo", tools)
	return srv, mcptest.HTTPHandler(srv, mcptest.Modern)
}

// grant creates a Role allowing invoke on the named deployments (all when names is empty) and
// a RoleBinding named name for it.
func makeGrant(t testing.TB, ns, name string, names ...string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-role"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"servicedeployments"}, ResourceNames: names}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent", Namespace: ns}}}
	mustCreate(t, role)
	mustCreate(t, rb)
}

func mustCreate(t testing.TB, o client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func inlineProfile(ns, name string, doc *apiv1.ProfileDocument) *apiv1.McpServiceProfile {
	return &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{Inline: doc.DeepCopy()}}}
}

// deployment binds every operation of doc with the given grant, exposing all of them.
func newDeployment(ns, name, profile, provider, url string, doc *apiv1.ProfileDocument, cred *apiv1.CredentialRef, grantRef string) *apiv1.ServiceDeployment {
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: profile}, ProviderID: provider,
			MCPConnection: apiv1.MCPConnection{URL: url, CredentialRef: cred}}}
	for _, op := range doc.Operations {
		b := apiv1.OperationBinding{OperationRef: op.OperationRef, EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{grantRef}, Expose: true}
		if cred != nil {
			b.CredentialRef = cred.DeepCopy()
		}
		sd.Spec.Operations = append(sd.Spec.Operations, b)
	}
	return sd
}

// waitObj polls obj until cond holds, failing with the last observed status after timeout.
func waitObj[T client.Object](t testing.TB, obj T, timeout time.Duration, what string, cond func(T) bool) T {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	var err error
	if !pollUntil(pollInterval, timeout, func() bool {
		err = k8sClient.Get(context.Background(), key, obj)
		return err == nil && cond(obj)
	}) {
		t.Fatalf("%s %s: timed out waiting for %s (err %v): %s", kindName(obj), key, what, err, describeStatus(obj))
	}
	return obj
}

func kindName(o client.Object) string { return strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1.") }

func describeStatus(o client.Object) string {
	switch x := o.(type) {
	case *apiv1.ServiceDeployment:
		return fmt.Sprintf("%+v", x.Status)
	case *apiv1.McpServiceProfile:
		return fmt.Sprintf("%+v", x.Status)
	case *apiv1.McpCredential:
		return fmt.Sprintf("%+v", x.Status)
	}
	return ""
}

func conditionsOf(o client.Object) []metav1.Condition {
	switch x := o.(type) {
	case *apiv1.ServiceDeployment:
		return x.Status.Conditions
	case *apiv1.McpServiceProfile:
		return x.Status.Conditions
	case *apiv1.McpTrustPolicy:
		return x.Status.Conditions
	case *apiv1.McpCredential:
		return x.Status.Conditions
	}
	return nil
}

// hasCondition reports whether o has condition typ with status and reason ("" matches any).
func hasCondition(o client.Object, typ string, st metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(conditionsOf(o), typ)
	return c != nil && c.Status == st && (reason == "" || c.Reason == reason)
}

func condOf(o client.Object, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conditionsOf(o), typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// isReady reports Ready True for the current generation.
func isReady[T client.Object](o T) bool {
	return hasCondition(o, apiv1.ConditionReady, metav1.ConditionTrue, "") && observedGen(o) == o.GetGeneration()
}

func observedGen(o client.Object) int64 {
	switch x := o.(type) {
	case *apiv1.ServiceDeployment:
		return x.Status.ObservedGeneration
	case *apiv1.McpServiceProfile:
		return x.Status.ObservedGeneration
	case *apiv1.McpTrustPolicy:
		return x.Status.ObservedGeneration
	case *apiv1.McpCredential:
		return x.Status.ObservedGeneration
	}
	return -1
}

// kstatusOf computes the status a GitOps tool (Flux, Argo CD health via kstatus) reads.
func kstatusOf(t testing.TB, o client.Object) status.Status {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// eventReasons returns the reasons of the events regarding the named object.
func eventReasons(t testing.TB, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}

// waitEvent waits until an event "Type/Reason" regarding the named object is recorded.
func waitEvent(t testing.TB, ns, name, want string) {
	t.Helper()
	var got []string
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		got = eventReasons(t, ns, name)
		return slices.Contains(got, want)
	}) {
		t.Fatalf("no event %s for %s; got %v", want, name, got)
	}
}

// newSecret is a credential Secret that opts in (connectors.b10x.io/credential=true) for the
// story servers' host, 127.0.0.1 on any port.
func newSecret(ns, name, key, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:      map[string]string{apiv1.CredentialLabel: "true"},
		Annotations: map[string]string{apiv1.CredentialAllowedHostsAnnotation: "127.0.0.1"}},
		Data: map[string][]byte{key: []byte(value)}}
}

// mutate re-reads obj and applies fn, retrying on update conflicts (the manager writes status).
func mutate[T client.Object](t testing.TB, obj T, fn func(T)) {
	t.Helper()
	for i := 0; ; i++ {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		fn(obj)
		err := k8sClient.Update(context.Background(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i == 20 {
			t.Fatalf("update %s: %v", obj.GetName(), err)
		}
	}
}

type clientObject = client.Object

type corev1Secret = corev1.Secret

func objKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

// newNamespaceTB creates a fresh namespace (for benchmarks too) and deletes it at the end.
//
// envtest runs no namespace controller, so a deleted namespace stays Terminating and keeps its
// objects. The cleanup therefore deletes the namespace's ServiceDeployments first: a deployment
// left behind keeps its cluster-wide claims (provider, operations and the upstream authority), and
// a later story whose loopback server reuses the freed port would see AuthorityCollision.
func newNamespaceTB(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := k8sClient.DeleteAllOf(ctx, &apiv1.ServiceDeployment{}, client.InNamespace(ns.Name)); err != nil {
			t.Errorf("delete the ServiceDeployments of namespace %s: %v", ns.Name, err)
		}
		_ = k8sClient.Delete(ctx, ns)
	})
	return ns.Name
}

// goroutineStacks returns the stacks of every goroutine, for a failure that a goroutine still
// running explains.
func goroutineStacks() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}
