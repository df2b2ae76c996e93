package envtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/packstore"
)

// gatewayRole reads config/gateway/rbac/role.yaml, the gateway's generated ClusterRole, and
// checks it has no wildcard and reads Secrets only by name.
func gatewayRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		for _, f := range [][]string{r.Verbs, r.APIGroups, r.Resources} {
			if slices.Contains(f, "*") {
				t.Fatalf("wildcard in the gateway role: %+v", r)
			}
		}
		// No Secret right at all: a namespace consents with a RoleBinding (docs/security.md).
		if slices.Contains(r.Resources, "secrets") {
			t.Fatalf("the gateway's ClusterRole grants Secrets: %+v", r)
		}
		// No write on ServiceDeployments: live drift creates an McpReverifyRequest.
		if slices.Contains(r.Resources, "servicedeployments") && slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
			t.Fatalf("servicedeployments may only be read: %+v", r)
		}
	}
	return role
}

// gatewayCredentialsRole reads config/gateway/rbac/credentials_role.yaml, the ClusterRole a
// namespace binds to consent to the gateway reading its Secrets: get, nothing else.
func gatewayCredentialsRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "rbac", "credentials_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"secrets"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
		t.Fatalf("the credentials role is not secrets get only: %+v", role.Rules)
	}
	return role
}

// asGatewayWithRole binds role to a fresh ServiceAccount "gateway" of ns and returns a config
// impersonating it.
func asGatewayWithRole(t *testing.T, ns string, role *rbacv1.ClusterRole) *rest.Config {
	t.Helper()
	role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-gateway-role"}
	mustCreate(t, role)
	t.Cleanup(func() { _ = k8sClient.Delete(t.Context(), role) })
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway"}})
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-gateway"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "gateway"}}}
	mustCreate(t, crb)
	t.Cleanup(func() { _ = k8sClient.Delete(t.Context(), crb) })
	// The namespace's consent to the gateway reading its Secrets (config/gateway/rbac/credentials_role.yaml).
	consentRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-gateway-credentials"}, Rules: gatewayCredentialsRole(t).Rules}
	mustCreate(t, consentRole)
	t.Cleanup(func() { _ = k8sClient.Delete(t.Context(), consentRole) })
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "connector-mcp-gateway-credentials"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: consentRole.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "gateway"}}})
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":gateway",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return as
}

// gatewayWorld activates one deployment of a modern upstream with a credential and returns the
// agent's token and the upstream server.
func gatewayWorld(t *testing.T, ns string) (string, *mcp.Server) {
	t.Helper()
	startOperator(t, ns, devOptions())
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}})
	srv, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "agents-invoke", "svc")
	mustCreate(t, newSecret(ns, "tok", "token", "v1"))
	cred := &apiv1.CredentialRef{Name: "tok", Key: "token"}
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, cred, "agents-invoke")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	return mintToken(t, ns, "agent", "connector-mcp"), srv
}

// The gateway runs with exactly the generated ClusterRole (and the namespace's consent to read
// its Secrets): it authenticates, authorizes, reads the credential Secret, calls, and on drift
// creates an McpReverifyRequest (which the manager satisfies and deletes) and records an event.
func TestStoryGatewayRBACIsSufficient(t *testing.T) {
	ns := newNamespace(t, "story-gwrbac")
	as := asGatewayWithRole(t, ns, gatewayRole(t))
	token, srv := gatewayWorld(t, ns)
	base, _, logs := startGatewayAs(t, as, ns, gatewayOptions())
	cs, err := mcpConnect(t, base+"/mcp/"+ns+"/svc", token, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, storyTimeout, "call under the generated gateway role", func() error {
		_, err := callTool(cs, "echo", map[string]any{"text": "rbac"})
		return err
	})
	changed := mcptest.DefaultTools()[0]
	changed.Description = "changed"
	mcptest.SetTool(srv, changed)
	if _, err := callTool(cs, "echo", nil); refusedName(err) != invocation.RefusalLiveDrift {
		t.Fatalf("after drift: %v", err)
	}
	// No periodic re-verification is configured: only the request can make the manager see it.
	waitObj(t, &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, storyTimeout, "drift refused after the re-verify request",
		func(sd *apiv1.ServiceDeployment) bool {
			return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDrift) && sd.Annotations[apiv1.ReverifyRequestedAtAnnotation] == ""
		})
	eventually(t, storyTimeout, "the satisfied McpReverifyRequest deleted", func() error {
		var l apiv1.McpReverifyRequestList
		if err := k8sClient.List(t.Context(), &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return errString("requests remain")
		}
		return nil
	})
	waitEvent(t, ns, "svc", "Warning/LiveDrift")
	if strings.Contains(logs.text(), "Forbidden") {
		t.Fatalf("the gateway met a Forbidden answer:\n%s", logs.text())
	}
}

// The must-fail twin: without "create tokenreviews" no caller is authenticated (401), and the
// log names only the apiserver's reason.
func TestStoryGatewayWithoutTokenReviewsRefusesEveryone(t *testing.T) {
	ns := newNamespace(t, "story-gwrbac-no-tr")
	role := gatewayRole(t)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "tokenreviews") })
	as := asGatewayWithRole(t, ns, role)
	token, _ := gatewayWorld(t, ns)
	base, gw, logs := startGatewayAs(t, as, ns, gatewayOptions())
	// The gateway serves the deployment (as in the twin above): the refusal is authentication's.
	if !pollUntil(pollInterval, storyTimeout, func() bool { _, ok := gw.Registry.Lookup(ns, "svc"); return ok }) {
		t.Fatalf("the gateway never served %s/svc", ns)
	}
	status, hdr, body := rawPost(t, base+"/mcp/"+ns+"/svc", token)
	if status != 401 || hdr.Get("WWW-Authenticate") == "" || !strings.Contains(body, "refused: unauthenticated") {
		t.Fatalf("without tokenreviews: %d %s", status, body)
	}
	if !strings.Contains(logs.text(), `"reason"`) || !strings.Contains(logs.text(), "Forbidden") || strings.Contains(logs.text(), token) {
		t.Fatalf("log:\n%s", logs.text())
	}
}

// The gateway reads the verified-pack store (--verified-pack-namespace, read-only) with exactly
// its generated ClusterRole: an entry the manager stored loads as the gateway's ServiceAccount.
// The twin: the same role without configmaps get is refused (403), so the check is not blind.
func TestGatewayReadsVerifiedPackStoreUnderItsRole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		strip bool
	}{{"role as generated", false}, {"role without configmaps", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, "gw-packstore")
			role := gatewayRole(t)
			if tc.strip {
				for i := range role.Rules {
					role.Rules[i].Resources = slices.DeleteFunc(slices.Clone(role.Rules[i].Resources), func(r string) bool { return r == "configmaps" })
				}
			}
			as, err := client.New(asGatewayWithRole(t, ns, role), client.Options{Scheme: k8sClient.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ociregistry.ParseDigestReference("registry.example.com/team/demo@sha256:" + hex64("demo"))
			if err != nil {
				t.Fatal(err)
			}
			rec := &ociregistry.StoredPack{Reference: ref, Blobs: map[string][]byte{ref.Digest: []byte(`{"manifest":true}`)}}
			if err := storeOf(t, ns).Save(t.Context(), rec); err != nil {
				t.Fatal(err)
			}
			gw, err := packstore.New(ns, as, nil, 0, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			got, err := gw.Load(t.Context(), ref)
			switch {
			case tc.strip && !apierrors.IsForbidden(err):
				t.Fatalf("without configmaps get the load was not refused: %v", err)
			case !tc.strip && (err != nil || !bytes.Equal(got.Blobs[ref.Digest], rec.Blobs[ref.Digest])):
				t.Fatalf("the gateway's role cannot load the stored pack: %v", err)
			}
		})
	}
}
