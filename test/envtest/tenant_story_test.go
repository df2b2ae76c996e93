package envtest

// The hostile-tenant story: a tenant who may edit McpServiceProfiles and ServiceDeployments in
// its own namespace only, and may not read Secrets, tries to make the operator (running under
// the chart's ClusterRole, config/rbac/role.yaml) spend Secrets it was not given, open ranges
// the platform did not allow, reach the apiserver or a cloud metadata address, and learn about
// another namespace through a collision. Every attempt ends in a named refusal and nothing
// reaches its endpoint (counting servers); the legitimate path activates and its bearer arrives.

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

// tenantCounter is a loopback MCP endpoint that counts requests and records every
// Authorization header it receives.
type tenantCounter struct {
	URL  string
	hits atomic.Int64
	mu   sync.Mutex
	auth []string
}

// tenantCountingServer serves the demo tools on addr ("127.0.0.1:0" or another loopback alias).
func tenantCountingServer(t *testing.T, addr string) *tenantCounter {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	_, h := modernServer(mcptest.DefaultTools())
	c := &tenantCounter{}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		if a := r.Header.Get("Authorization"); a != "" {
			c.mu.Lock()
			c.auth = append(c.auth, a)
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *tenantCounter) authorizations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.auth...)
}

// tenantManagerIdentity binds a fresh ServiceAccount sa of ns to a copy of
// config/rbac/role.yaml and returns a rest.Config impersonating it.
func tenantManagerIdentity(t *testing.T, ns, sa string) *rest.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-" + sa + "-role"}
	mustCreate(t, role)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), role) })
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}}}
	mustCreate(t, crb)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), crb) })
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	return c
}

// tenantStartManager starts the manager as restCfg watching namespaces, wired by managerapp.Setup with
// the production cache configuration (managerapp.CacheOptions). Its stop function waits for it to stop
// (also called when the test ends).
func tenantStartManager(t *testing.T, restCfg *rest.Config, o managerapp.Options, namespaces ...string) *operator {
	t.Helper()
	return startOperatorIn(t, restCfg, namespaces, o)
}

// tenantIdentity is a user with edit rights on McpServiceProfiles and ServiceDeployments in ns
// only, and no Secret access.
func tenantIdentity(t *testing.T, ns, user string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"mcpserviceprofiles", "servicedeployments"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	mustCreate(t, role)
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// tenantKeyFile writes an HMAC key file for --credential-hash-key-file.
func tenantKeyFile(t *testing.T, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hash.key")
	if err := os.WriteFile(p, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tenantSecret(ns, name string, typ corev1.SecretType, labelled bool, hosts string, ann map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}}, Type: typ,
		Data: map[string][]byte{"token": []byte("tenant-stolen-" + name)}}
	if labelled {
		s.Labels = map[string]string{apiv1.CredentialLabel: "true"}
	}
	if hosts != "" {
		s.Annotations[apiv1.CredentialAllowedHostsAnnotation] = hosts
	}
	for k, v := range ann {
		s.Annotations[k] = v
	}
	return s
}

func TestStoryHostileTenant(t *testing.T) {
	tenantNS := newNamespace(t, "tenant")
	victimNS := newNamespace(t, "victim")
	mutate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}, func(n *corev1.Namespace) {
		n.Labels = map[string]string{"tenant-story/team": tenantNS}
	})

	// The platform's egress ceiling for the tenant's namespace: 10.20.0.0/16, plus the cluster's
	// own Service range and the IPv6 ULA range (to show that the Service CIDR and the metadata
	// addresses in it stay denied whatever is allowed).
	tp := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: tenantNS + "-egress"},
		Spec: apiv1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tenant-story/team": tenantNS}},
			Egress:            apiv1.TrustEgressCeiling{AllowedCIDRs: []string{"10.20.0.0/16", "10.0.0.0/16", "198.51.100.0/24", "fd00::/8"}},
		}}
	mustCreate(t, tp)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tp) })
	// Another team's wider grant does not apply to the tenant.
	mutate(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victimNS}}, func(n *corev1.Namespace) {
		n.Labels = map[string]string{"tenant-story/team": victimNS}
	})
	other := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: victimNS + "-egress"},
		Spec: apiv1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tenant-story/team": victimNS}},
			Egress:            apiv1.TrustEgressCeiling{AllowedCIDRs: []string{"10.0.0.0/8"}},
		}}
	mustCreate(t, other)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), other) })

	// The apiserver's endpoint as the cluster publishes it (this control plane runs with
	// --endpoint-reconciler-type=none, so the story publishes it; EndpointSlices refuse
	// loopback addresses): 198.51.100.7, inside a range the ceiling and the tenant allow.
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: tenantNS + "-kubernetes",
		Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.7"}}}}
	mustCreate(t, es)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), es) })

	o := devOptions()
	o.CredentialHashKeyFile = tenantKeyFile(t, "tenant-story-key-0123456789abcdef")
	op := tenantStartManager(t, tenantManagerIdentity(t, tenantNS, "manager"), o, tenantNS, victimNS)

	hostile := tenantCountingServer(t, "127.0.0.1:0")
	legit := tenantCountingServer(t, "127.0.0.1:0")
	victim := tenantCountingServer(t, "127.0.0.1:0")
	base := reviewedProfile(t, legit.URL+"/mcp")
	hostileHits := hostile.hits.Load()

	// The victim team's deployment, active first.
	makeGrant(t, victimNS, "all")
	vdoc := base.DeepCopy()
	vdoc.Service = apiv1.ServiceIdentity{Ref: "payroll", ConnectionRef: "payroll"}
	mustCreate(t, inlineProfile(victimNS, "payroll", vdoc))
	vsd := newDeployment(victimNS, "payroll-bridge", "payroll", "payroll-provider", victim.URL+"/mcp", vdoc, nil, "all")
	mustCreate(t, vsd)
	vsd = waitObj(t, vsd, storyTimeout, "victim Ready", isReady[*apiv1.ServiceDeployment])
	victimHits := victim.hits.Load()
	waitNextSecond(t, vsd.CreationTimestamp) // creation timestamps have second resolution

	// Secrets of the tenant's namespace, written by its namespace admin: an application Secret
	// that never opted in, one opted in for another host, a ServiceAccount token that opted in
	// for the right host, and the real MCP credential.
	makeGrant(t, tenantNS, "all")
	for _, s := range []*corev1.Secret{
		tenantSecret(tenantNS, "app-db", corev1.SecretTypeOpaque, false, "", nil),
		tenantSecret(tenantNS, "for-elsewhere", corev1.SecretTypeOpaque, true, "mcp.example.com", nil),
		tenantSecret(tenantNS, "sa-token", corev1.SecretTypeServiceAccountToken, true, "127.0.0.1",
			map[string]string{corev1.ServiceAccountNameKey: "default"}),
		tenantSecret(tenantNS, "mcp-token", corev1.SecretTypeOpaque, true, "127.0.0.1", nil),
	} {
		mustCreate(t, s)
	}

	alice := tenantIdentity(t, tenantNS, "tenant-alice")
	if err := alice.Get(context.Background(), client.ObjectKey{Namespace: tenantNS, Name: "app-db"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant identity can read Secrets (%v): the story needs one that cannot", err)
	}
	if err := alice.Create(context.Background(), inlineProfile(victimNS, "intrude", base)); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant identity can write another namespace (%v)", err)
	}

	// deploy creates, as the tenant, a profile with its own Connection and a deployment of it.
	deploy := func(name, url string, cred *apiv1.CredentialRef, allow ...string) *apiv1.ServiceDeployment {
		t.Helper()
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		if err := alice.Create(context.Background(), inlineProfile(tenantNS, name, doc)); err != nil {
			t.Fatalf("tenant creates profile %s: %v", name, err)
		}
		sd := newDeployment(tenantNS, name, name, "tenant-"+name, url, doc, cred, "all")
		sd.Spec.MCPConnection.Egress.AllowCIDRs = allow
		if err := alice.Create(context.Background(), sd); err != nil {
			t.Fatalf("tenant creates deployment %s: %v", name, err)
		}
		return sd
	}
	cred := func(name string) *apiv1.CredentialRef { return &apiv1.CredentialRef{Name: name, Key: "token"} }

	type attempt struct {
		sd       *apiv1.ServiceDeployment
		reason   string
		refusal  string
		stalled  bool
		mustHide []string
	}
	attempts := map[string]attempt{
		"Secret without the label": {sd: deploy("no-label", hostile.URL+"/mcp/1", cred("app-db")),
			reason: apiv1.ReasonCredentialNotFound, refusal: k8sbinding.RefusalCredentialNotOptedIn},
		"labelled Secret for another host": {sd: deploy("other-host", hostile.URL+"/mcp/2", cred("for-elsewhere")),
			reason: apiv1.ReasonCredentialRefused, refusal: k8sbinding.RefusalCredentialHostNotAllowed, stalled: true, mustHide: []string{"mcp.example.com"}},
		"ServiceAccount-token Secret": {sd: deploy("sa-token", hostile.URL+"/mcp/3", cred("sa-token")),
			reason: apiv1.ReasonCredentialRefused, refusal: k8sbinding.RefusalCredentialServiceAccountToken, stalled: true},
		"allowCIDRs beyond the ceiling (another team's grant)": {sd: deploy("wide", hostile.URL+"/mcp/4", nil, "10.0.0.0/8"),
			reason: apiv1.ReasonEndpointRefused, refusal: k8sbinding.RefusalEgressCeiling, stalled: true, mustHide: []string{"10.20.0.0"}},
		"the apiserver's endpoint address inside an allowed range": {sd: deploy("apiserver", "https://198.51.100.7:6443/mcp", nil, "198.51.100.0/24"),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"apiserver"}},
		"the kubernetes Service inside an allowed range": {sd: deploy("service-cidr", "http://10.0.0.1:443/mcp", nil, "10.0.0.0/24"),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"apiserver"}},
		"IPv4 metadata": {sd: deploy("imds4", "http://169.254.169.254/mcp", nil),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"metadata"}},
		"IPv6 metadata (AWS) inside an allowed range": {sd: deploy("imds6", "http://[fd00:ec2::254]/mcp", nil, "fd00::/8"),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"metadata"}},
		"IPv6 metadata (GCP)": {sd: deploy("gcp6", "http://[fd20:ce::254]/mcp", nil),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"metadata"}},
		"IPv4 metadata mapped into IPv6": {sd: deploy("mapped", "http://[::ffff:169.254.169.254]/mcp", nil),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"metadata"}},
		"IPv4 metadata through NAT64": {sd: deploy("nat64", "http://[64:ff9b::a9fe:a9fe]/mcp", nil),
			reason: apiv1.ReasonEndpointRefused, refusal: "destination_refused", stalled: true, mustHide: []string{"metadata"}},
		"another namespace's endpoint": {sd: deploy("collide", victim.URL+"/mcp", nil),
			reason: apiv1.ReasonAuthorityCollision, refusal: "another deployment", stalled: true, mustHide: []string{victimNS, "payroll"}},
	}

	// Twin of the apiserver attempt: the neighbouring address of the same allowed range passes
	// the Bound stage's check, the apiserver's own endpoint does not. The twin is the Binder's
	// check against this apiserver (no dial: a freeze would send packets to 198.51.100.8, which
	// is not an address of this machine).
	bindCheck := &k8sbinding.Binder{Ceilings: &k8sbinding.TrustPolicyCeilings{Reader: k8sClient}, Deny: &k8sbinding.APIServerDeny{Reader: k8sClient}}
	if err := bindCheck.Check(context.Background(), k8sbinding.Request{Namespace: tenantNS, URL: "https://198.51.100.8:6443/mcp", AllowCIDRs: []string{"198.51.100.0/24"}}); err != nil {
		t.Fatalf("the apiserver's neighbour address is refused too (%v): the apiserver attempt proves nothing", err)
	}
	if err := bindCheck.Check(context.Background(), k8sbinding.Request{Namespace: tenantNS, URL: "https://198.51.100.7:6443/mcp", AllowCIDRs: []string{"198.51.100.0/24"}}); refusal.Name(err) != egress.RefusalDestination {
		t.Fatalf("the apiserver's endpoint: err = %v, want %s", err, egress.RefusalDestination)
	}

	// The legitimate path, and its twin inside the ceiling: Ready, the bearer arrives.
	good := deploy("legit", legit.URL+"/mcp", cred("mcp-token"))
	inCeiling := deploy("in-ceiling", legit.URL+"/mcp/in-ceiling", nil, "10.20.1.0/24")
	good = waitObj(t, good, storyTimeout, "the legitimate deployment Ready", isReady[*apiv1.ServiceDeployment])
	waitObj(t, inCeiling, storyTimeout, "allowCIDRs within the ceiling Ready", isReady[*apiv1.ServiceDeployment])
	if auth := legit.authorizations(); len(auth) == 0 || auth[len(auth)-1] != "Bearer tenant-stolen-mcp-token" {
		t.Fatalf("the legitimate server saw Authorization %q", auth)
	}
	if !strings.HasPrefix(good.Status.CredentialHash, "hmac:") {
		t.Fatalf("credentialHash %q is not an HMAC", good.Status.CredentialHash)
	}

	for name, a := range attempts {
		sd := refusedWith(t, a.sd, a.reason)
		msg := condOf(sd, apiv1.ConditionReady).Message
		if !strings.Contains(msg, a.refusal) {
			t.Errorf("%s: Ready message %q does not name %q", name, msg, a.refusal)
		}
		if stalled := hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, a.reason); stalled != a.stalled {
			t.Errorf("%s: Stalled=%v, want %v (%+v)", name, stalled, a.stalled, sd.Status.Conditions)
		}
		js := mustJSON(t, sd.Status)
		// No refusal in the tenant's namespace names anything of the victim's namespace (its
		// name, its objects, the other team's McpTrustPolicy) nor the tenant's Secret values.
		hide := append(slices.Clone(a.mustHide), "tenant-stolen", victimNS, "payroll", other.Name)
		for _, hidden := range hide {
			if strings.Contains(js, hidden) {
				t.Errorf("%s: status carries %q: %s", name, hidden, msg)
			}
		}
		// Refusals of the endpoint are decided by the Bound stage: the freeze never ran, so
		// nothing was dialed.
		if a.reason == apiv1.ReasonEndpointRefused && !hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, a.reason) {
			t.Errorf("%s: not refused by the Bound stage: %+v", name, sd.Status.Conditions)
		}
		if sd.Status.ActiveSnapshotDigest != "" || sd.Status.CredentialHash != "" {
			t.Errorf("%s: refused deployment has status %+v", name, sd.Status)
		}
		for _, e := range eventReasons(t, tenantNS, sd.Name) {
			if strings.Contains(e, "Activated") {
				t.Errorf("%s: event %s", name, e)
			}
		}
	}

	// Nothing reached any endpoint of a refused attempt, and no Authorization header ever did,
	// even after every refused attempt has passed once more (a label change queues the pass a
	// retry of a transient refusal would run).
	passes := map[string]int{}
	for _, a := range attempts {
		passes[a.sd.Name] = op.reconciles(tenantNS + "/" + a.sd.Name)
		mutate(t, &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: a.sd.Name}},
			func(sd *apiv1.ServiceDeployment) { sd.Labels = map[string]string{"tenant-story/poke": "1"} })
	}
	for name, n := range passes {
		waitPasses(t, op, tenantNS+"/"+name, n, 1, deploymentController)
	}
	if n := hostile.hits.Load() - hostileHits; n != 0 {
		t.Errorf("the tenant's endpoints received %d requests", n)
	}
	if n := victim.hits.Load() - victimHits; n != 0 {
		t.Errorf("the victim's endpoint received %d requests after the tenant's collision", n)
	}
	for _, c := range []*tenantCounter{hostile, victim} {
		if auth := c.authorizations(); len(auth) != 0 {
			t.Errorf("an Authorization header reached %s: %d times", c.URL, len(auth))
		}
	}
	if !isReady(waitObj(t, vsd, time.Second, "victim", func(*apiv1.ServiceDeployment) bool { return true })) {
		t.Error("the victim lost its endpoint to the tenant")
	}

	// The credential hash is keyed by the operator: a restart with the same key file keeps it
	// and sends nothing (no re-freeze); a restart with another key changes it (re-freeze).
	op.stop()
	legitHits := legit.hits.Load()
	hash := good.Status.CredentialHash
	op = tenantStartManager(t, tenantManagerIdentity(t, tenantNS, "manager-2"), o, tenantNS, victimNS)
	// The restarted manager passes over the deployment (its informers' initial list); once that
	// pass has finished, nothing was re-frozen.
	waitPasses(t, op, tenantNS+"/legit", 0, 1, deploymentController)
	good = waitObj(t, good, storyTimeout, "still Ready after a restart", isReady[*apiv1.ServiceDeployment])
	if good.Status.CredentialHash != hash || legit.hits.Load() != legitHits {
		t.Fatalf("same key: hash %s -> %s, %d requests after the restart", hash, good.Status.CredentialHash, legit.hits.Load()-legitHits)
	}
	op.stop()
	o.CredentialHashKeyFile = tenantKeyFile(t, "another-operator-key-0123456789ab")
	tenantStartManager(t, tenantManagerIdentity(t, tenantNS, "manager-3"), o, tenantNS, victimNS)
	waitObj(t, good, storyTimeout, "hash under the new key", func(sd *apiv1.ServiceDeployment) bool {
		return isReady(sd) && sd.Status.CredentialHash != hash && sd.Status.CredentialHash != ""
	})
	if legit.hits.Load() == legitHits {
		t.Fatal("a changed hash did not re-freeze")
	}

	// The platform lowers the ceiling: the deployment that relied on it is refused at once (the
	// McpTrustPolicy watch), with nothing active.
	mutate(t, tp, func(p *apiv1.McpTrustPolicy) { p.Spec.Egress.AllowedCIDRs = []string{"10.0.0.0/16"} })
	lowered := refusedWith(t, inCeiling, apiv1.ReasonEndpointRefused)
	if msg := condOf(lowered, apiv1.ConditionReady).Message; !strings.Contains(msg, k8sbinding.RefusalEgressCeiling) || lowered.Status.ActiveSnapshotDigest != "" {
		t.Fatalf("after the ceiling was lowered: %q, active %q", msg, lowered.Status.ActiveSnapshotDigest)
	}
}

// The manager's cache configuration (appoptions.CacheByObject) gives an informer that holds only
// opted-in Secrets: an unlabelled Secret of the same namespace is not in it. Twin: the same cache
// without that configuration holds both.
func TestStoryCredentialCacheHoldsOnlyOptedInSecrets(t *testing.T) {
	ns := newNamespace(t, "tenant-cache")
	mustCreate(t, tenantSecret(ns, "opted-in", corev1.SecretTypeOpaque, true, "127.0.0.1", nil))
	mustCreate(t, tenantSecret(ns, "app-db", corev1.SecretTypeOpaque, false, "", nil))
	names := func(byObject map[client.Object]cache.ByObject) []string {
		t.Helper()
		c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: byObject})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			t.Fatal("the cache did not sync")
		}
		var list corev1.SecretList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(appoptions.CacheByObject()); strings.Join(got, ",") != "opted-in" {
		t.Fatalf("the manager's Secret cache holds %v, want only opted-in", got)
	}
	if got := names(nil); len(got) != 2 {
		t.Fatalf("twin: an unfiltered cache holds %v, want both", got)
	}
}
