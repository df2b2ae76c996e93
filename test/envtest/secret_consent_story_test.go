package envtest

// Issue 21 finding 5: the manager and the gateway run under exactly the chart's ServiceAccounts
// and RBAC. The gateway holds no Secret right of its own: it reads a namespace's Secrets only
// where the namespace's admin consented with a RoleBinding of <fullname>-gateway-credentials.
// Every request each component sends to the apiserver is recorded (a counting proxy in its
// rest.Config), and the story shows that no Secret of a namespace without consent is ever
// returned to the gateway, that the manager reads Secrets only through the opt-in label
// selector, and that the consenting namespace's deployment is served with its bearer.

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// apiRequest is one request a component sent to the apiserver and the status it got.
type apiRequest struct {
	Method, Path, Query string
	Status              int
}

// requestLog records every apiserver request of one rest.Config (a counting proxy).
type requestLog struct {
	mu   sync.Mutex
	seen []apiRequest
}

type requestRecorder struct {
	log  *requestLog
	next http.RoundTripper
}

func (r requestRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	e := apiRequest{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	r.log.mu.Lock()
	r.log.seen = append(r.log.seen, e)
	r.log.mu.Unlock()
	return resp, err
}

// secrets returns the recorded requests on Secrets (any namespace, any verb).
func (l *requestLog) secrets() []apiRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []apiRequest
	for _, e := range l.seen {
		if p := strings.Split(strings.Trim(e.Path, "/"), "/"); (len(p) >= 3 && p[0] == "api" && p[2] == "secrets") ||
			(len(p) >= 5 && p[0] == "api" && p[2] == "namespaces" && p[4] == "secrets") {
			out = append(out, e)
		}
	}
	return out
}

// recordedAs returns a config impersonating ServiceAccount ns/sa whose requests log records.
func recordedAs(ns, sa string, log *requestLog) *rest.Config {
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	as.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestRecorder{log: log, next: rt} })
	return as
}

// chartServiceAccounts installs, for real, the chart's ServiceAccounts and RBAC (gateway
// enabled) for a release named after ns, and returns the manager's and the gateway's
// ServiceAccount names and the gateway's consent ClusterRole.
func chartServiceAccounts(t *testing.T, ns string) (manager, gateway, consentRole string) {
	t.Helper()
	values := map[string]any{"gateway": map[string]any{"enabled": true, "plainHTTPUnsafe": true}}
	for _, o := range objects(t, render(t, ns, ns, values)) {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		switch {
		case o.GetKind() == "ServiceAccount" && o.GetLabels()["app.kubernetes.io/component"] == "gateway":
			gateway = o.GetName()
		case o.GetKind() == "ServiceAccount":
			manager = o.GetName()
		case o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-gateway-credentials"):
			consentRole = o.GetName()
		}
		createRendered(t, o)
	}
	if manager == "" || gateway == "" || consentRole == "" {
		t.Fatalf("the chart renders manager SA %q, gateway SA %q, consent ClusterRole %q", manager, gateway, consentRole)
	}
	return manager, gateway, consentRole
}

func createRendered(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), o); err != nil {
		t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	if o.GetNamespace() == "" {
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
	}
}

// consent is the RoleBinding a namespace admin writes to let the gateway read the namespace's
// Secrets (docs/security.md).
func consent(ns, role, gatewayNS, gatewaySA string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "connector-mcp-gateway-credentials"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: gatewayNS, Name: gatewaySA}}}
}

// startRecordedManager starts the manager as cmd/manager does (cluster-wide cache, leader
// election in ns) authenticated with restCfg.
func startRecordedManager(t *testing.T, restCfg *rest.Config, ns string) {
	t.Helper()
	shutdown := 5 * time.Second
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: "connector-mcp.connectors.b10x.io", LeaderElectionNamespace: ns,
		LeaderElectionReleaseOnCancel: true, GracefulShutdownTimeout: &shutdown,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      managerapp.CacheOptions(), // as cmd/manager
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if _, err := managerapp.Setup(mgr, devOptions(), false); err != nil {
		t.Fatalf("setup: %v", err)
	}
	runManager(t, mgr)
}

// startClusterGateway starts the gateway as cmd/gateway does (cluster-wide cache) authenticated
// with restCfg, and returns its base URL and log.
func startClusterGateway(t *testing.T, restCfg *rest.Config) (string, *gatewayLog) {
	t.Helper()
	logs := &gatewayLog{mu: make(chan struct{}, 1)}
	shutdown := 10 * time.Second
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:                   cache.Options{ByObject: appoptions.CacheByObject()}, // as cmd/gateway
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: &shutdown,
	})
	if err != nil {
		t.Fatalf("gateway manager: %v", err)
	}
	w := setupGateway(t, mgr, gatewayOptions(), funcr.New(logs.add, funcr.Options{Verbosity: 1}))
	return serveGateway(t, mgr, w), logs
}

// bearerServer is a modern MCP upstream that records the Authorization headers it receives.
type bearerServer struct {
	*switchable
	mu      sync.Mutex
	bearers []string
}

func startBearerServer(t *testing.T) *bearerServer {
	t.Helper()
	_, h := modernServer(mcptest.DefaultTools())
	b := &bearerServer{}
	b.switchable = startSwitchable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.bearers = append(b.bearers, r.Header.Get("Authorization"))
		b.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return b
}

func (b *bearerServer) count(bearer string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.bearers {
		if s == bearer {
			n++
		}
	}
	return n
}

// tenantDeployment creates, in ns, an agent, a grant, the opted-in bearer Secret "tok" (value
// bearer), an unlabelled Secret "db-password", an inline profile and a deployment of up.
func tenantDeployment(t *testing.T, ns, bearer string, up *bearerServer) *apiv1.ServiceDeployment {
	t.Helper()
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}})
	doc := reviewedProfile(t, up.URL)
	// The manager's cache is cluster-wide: claim a Connection and a provider nobody else holds.
	doc.Service.Ref, doc.Service.ConnectionRef = ns, ns
	makeGrant(t, ns, "agents-invoke", "svc")
	mustCreate(t, newSecret(ns, "tok", "token", bearer))
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, Data: map[string][]byte{"password": []byte("never-read")}})
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", ns, up.URL, doc, &apiv1.CredentialRef{Name: "tok", Key: "token"}, "agents-invoke")
	mustCreate(t, sd)
	return sd
}

// TestStorySecretConsent: under the chart's ServiceAccounts, namespace "consenting" bound the
// gateway's credentials ClusterRole, namespace "silent" did not. Both deployments are Ready (the
// manager spends opted-in Secrets under the label and allowed-hosts rule). Through the gateway,
// the consenting namespace's call carries its bearer to its upstream; the silent namespace's
// call is refused credential_consent_missing, its upstream gets nothing from the gateway, and
// every request the gateway made for one of its Secrets was answered 403: nothing was read.
// Neither component ever lists, watches or gets a Secret other than by the opt-in label (the
// manager) or by name in a consenting namespace (the gateway); the unlabelled Secrets are never
// returned to either.
func TestStorySecretConsent(t *testing.T) {
	release := newNamespace(t, "consent-rel")
	managerSA, gatewaySA, consentRole := chartServiceAccounts(t, release)
	consenting := newNamespace(t, "consenting")
	silent := newNamespace(t, "silent")
	mustCreate(t, consent(consenting, consentRole, release, gatewaySA))

	mlog, glog := &requestLog{}, &requestLog{}
	startRecordedManager(t, recordedAs(release, managerSA, mlog), release)
	upA, upB := startBearerServer(t), startBearerServer(t)
	sdA := tenantDeployment(t, consenting, "bearer-consenting", upA)
	sdB := tenantDeployment(t, silent, "bearer-silent", upB)
	waitObj(t, sdA, storyTimeout, "consenting deployment Ready under the chart's RBAC", isReady[*apiv1.ServiceDeployment])
	waitObj(t, sdB, storyTimeout, "silent deployment Ready under the chart's RBAC", isReady[*apiv1.ServiceDeployment])

	base, logs := startClusterGateway(t, recordedAs(release, gatewaySA, glog))
	csA, err := mcpConnect(t, base+"/mcp/"+consenting+"/svc", mintToken(t, consenting, "agent", "connector-mcp"), "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, storyTimeout, "a call in the consenting namespace", func() error {
		_, err := callTool(csA, "echo", map[string]any{"text": "consented"})
		return err
	})
	if upA.count("Bearer bearer-consenting") == 0 {
		t.Fatal("the consenting namespace's bearer never reached its upstream through the gateway")
	}

	csB, err := mcpConnect(t, base+"/mcp/"+silent+"/svc", mintToken(t, silent, "agent", "connector-mcp"), "")
	if err != nil {
		t.Fatal(err)
	}
	hitsB := upB.hits.Load()
	eventually(t, storyTimeout, "the silent namespace's call refused "+k8sbinding.RefusalCredentialConsentMissing, func() error {
		if _, err := callTool(csB, "echo", map[string]any{"text": "no consent"}); refusedName(err) != k8sbinding.RefusalCredentialConsentMissing {
			return errString("refusal " + refusedName(err))
		}
		return nil
	})
	if n := upB.hits.Load() - hitsB; n != 0 {
		t.Fatalf("the silent namespace's upstream received %d request(s) through the gateway", n)
	}
	if strings.Contains(logs.text(), "bearer-") {
		t.Fatal("the gateway logged a bearer value")
	}

	// The gateway: no cluster-wide Secret request, no list or watch at all, a GET by name only;
	// in the consenting namespace only the named bearer; in every other namespace nothing but
	// 403s (never read).
	var consentedReads int
	for _, e := range glog.secrets() {
		p := strings.Split(strings.Trim(e.Path, "/"), "/")
		if e.Method != http.MethodGet || len(p) != 6 {
			t.Errorf("the gateway sent %s %s?%s: only a GET of one named Secret is allowed", e.Method, e.Path, e.Query)
			continue
		}
		switch ns, name := p[3], p[5]; {
		case ns == consenting && name == "tok" && e.Status == http.StatusOK:
			consentedReads++
		case ns == consenting:
			t.Errorf("the gateway read Secret %s/%s (%d)", ns, name, e.Status)
		case e.Status != http.StatusForbidden:
			t.Errorf("the gateway was answered %d for Secret %s/%s of a namespace without consent", e.Status, ns, name)
		}
	}
	if consentedReads == 0 {
		t.Fatal("the recorder saw no read of the consented bearer: the check is blind")
	}
	// The manager: Secrets read only through the opt-in label selector, never an unlabelled one,
	// and no Secret of this story's namespaces written (they hold no McpCredential). Its cache is
	// cluster-wide, as in production, so it may produce the McpCredentials other stories left
	// behind: those writes are the admission policy's to judge (TestManagerWritesOnlyOwnedSecrets).
	var managerReads int
	for _, e := range mlog.secrets() {
		q, _ := url.ParseQuery(e.Query)
		if e.Method != http.MethodGet {
			if p := strings.Split(strings.Trim(e.Path, "/"), "/"); len(p) < 4 || p[3] == consenting || p[3] == silent || p[3] == release {
				t.Errorf("the manager sent %s %s?%s", e.Method, e.Path, e.Query)
			}
			continue
		}
		if !slices.Contains(strings.Split(q.Get("labelSelector"), ","), apiv1.CredentialLabel+"=true") {
			t.Errorf("the manager sent %s %s?%s without the opt-in label selector", e.Method, e.Path, e.Query)
			continue
		}
		managerReads++
	}
	if managerReads == 0 {
		t.Fatal("the recorder saw no Secret read of the manager: the check is blind")
	}
}

// TestStoryConsentRevokedIsRefused is the twin: the consenting namespace's admin deletes the
// RoleBinding; the next call (a new upstream session reads the bearer again) is refused
// credential_consent_missing and nothing reaches the upstream.
func TestStoryConsentRevokedIsRefused(t *testing.T) {
	release := newNamespace(t, "consent-rev")
	managerSA, gatewaySA, consentRole := chartServiceAccounts(t, release)
	ns := newNamespace(t, "revoking")
	rb := consent(ns, consentRole, release, gatewaySA)
	mustCreate(t, rb)
	startRecordedManager(t, recordedAs(release, managerSA, &requestLog{}), release)
	up := startBearerServer(t)
	sd := tenantDeployment(t, ns, "bearer-revoked", up)
	waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	base, _ := startClusterGateway(t, recordedAs(release, gatewaySA, &requestLog{}))
	cs, err := mcpConnect(t, base+"/mcp/"+ns+"/svc", mintToken(t, ns, "agent", "connector-mcp"), "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, storyTimeout, "a call with consent", func() error {
		_, err := callTool(cs, "echo", map[string]any{"text": "before"})
		return err
	})
	if err := k8sClient.Delete(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	eventually(t, storyTimeout, "refused once consent is revoked", func() error {
		before := up.count("Bearer bearer-revoked")
		_, err := callTool(cs, "echo", map[string]any{"text": "after"})
		if refusedName(err) != k8sbinding.RefusalCredentialConsentMissing {
			return errString("refusal " + refusedName(err))
		}
		if up.count("Bearer bearer-revoked") != before {
			return errString("the bearer reached the upstream after the consent was revoked")
		}
		return nil
	})
}

// TestCompromisedGatewayReach plays a compromised gateway: with the chart's gateway
// ServiceAccount it tries everything a thief would. Listing or watching Secrets (cluster-wide or
// in a consenting namespace), reading one where no consent was given, and patching a
// ServiceDeployment are all forbidden; the one thing that works is a GET by name in the
// consenting namespace (the twin, so the check is not blind).
func TestCompromisedGatewayReach(t *testing.T) {
	release := newNamespace(t, "gw-thief")
	_, gatewaySA, consentRole := chartServiceAccounts(t, release)
	consenting := newNamespace(t, "gw-thief-consenting")
	silent := newNamespace(t, "gw-thief-silent")
	mustCreate(t, consent(consenting, consentRole, release, gatewaySA))
	for _, ns := range []string{consenting, silent} {
		mustCreate(t, newSecret(ns, "tok", "token", "loot-"+ns))
	}
	up := startBearerServer(t)
	sd := newDeployment(silent, "svc", "svc", silent, up.URL, reviewedProfile(t, up.URL), nil, "all")
	mustCreate(t, sd)
	thief, err := client.NewWithWatch(recordedAs(release, gatewaySA, &requestLog{}), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	forbidden("list Secrets cluster-wide", thief.List(ctx, &corev1.SecretList{}))
	forbidden("list Secrets in the consenting namespace", thief.List(ctx, &corev1.SecretList{}, client.InNamespace(consenting)))
	forbidden("get a Secret without consent", thief.Get(ctx, types.NamespacedName{Namespace: silent, Name: "tok"}, &corev1.Secret{}))
	forbidden("patch a ServiceDeployment", thief.Patch(ctx, sd.DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"connectors.b10x.io/reverify-requested-at":"2026-01-01T00:00:00Z"}}}`))))
	if w, err := thief.Watch(ctx, &corev1.SecretList{}); err == nil {
		w.Stop()
		t.Error("watch Secrets cluster-wide was allowed")
	}
	got := &corev1.Secret{}
	if err := thief.Get(ctx, types.NamespacedName{Namespace: consenting, Name: "tok"}, got); err != nil || string(got.Data["token"]) != "loot-"+consenting {
		t.Fatalf("the consented GET by name: %v", err)
	}
}
