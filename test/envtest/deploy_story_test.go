package envtest

// Stories of installing the operator: the generated RBAC is enough for the manager to do its
// whole job, and the Helm chart ships exactly the generated CRDs and RBAC rules.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// The manager running as a service account bound only to config/rbac/role.yaml (generated from
// the controllers' markers) verifies a profile, checks grants, reads the opted-in credential
// Secret through its label-filtered cache, reads the namespace's egress ceiling and the
// apiserver's addresses, freezes, activates and records events.
func TestStoryGeneratedRBACIsSufficient(t *testing.T) {
	ns := newNamespace(t, "story-rbac")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	for _, r := range role.Rules {
		for _, f := range [][]string{r.Verbs, r.APIGroups, r.Resources} {
			for _, v := range f {
				if v == "*" {
					t.Fatalf("wildcard in the generated role: %+v", r)
				}
			}
		}
		for _, res := range r.Resources {
			// list and watch for the label-filtered informer (no get: nothing reads a Secret by
			// name); create, update and patch for the OAuth producer's target and refresh-token
			// Secrets (the chart's admission policy admits only McpCredential-controlled ones);
			// never delete.
			if res == "secrets" && strings.Join(r.Verbs, ",") != "create,list,patch,update,watch" {
				t.Fatalf("secrets must be read (the label-filtered informer) and written by the OAuth producer only, never deleted: %+v", r)
			}
		}
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-manager-role"}
	mustCreate(t, role)
	t.Cleanup(func() { _ = k8sClient.Delete(t.Context(), role) })
	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager"}})
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "manager"}}}
	mustCreate(t, crb)
	t.Cleanup(func() { _ = k8sClient.Delete(t.Context(), crb) })

	asManager := rest.CopyConfig(cfg)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":manager"}
	startOperatorAs(t, asManager, ns, devOptions())

	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	mustCreate(t, newSecret(ns, "tok", "token", "v1"))
	cred := &apiv1.CredentialRef{Name: "tok", Key: "token"}
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, cred, "all")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "Ready under the generated RBAC", isReady[*apiv1.ServiceDeployment])
	waitEvent(t, ns, "svc", "Normal/Activated")
}

// The chart ships the generated CRDs byte for byte and the generated manager rules.
func TestStoryChartMatchesGeneratedManifests(t *testing.T) {
	bases := filepath.Join(repoRoot, "config", "crd", "bases")
	entries, err := os.ReadDir(bases)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, _ := os.ReadFile(filepath.Join(bases, e.Name()))
		got, err := os.ReadFile(filepath.Join(repoRoot, "charts", "connector-mcp", "crds", e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/connector-mcp/crds/%s differs from config/crd/bases (copy it after `make manifests`)", e.Name())
		}
	}
	role, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(repoRoot, "charts", "connector-mcp", "templates", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantRules := string(role[strings.Index(string(role), "rules:"):])
	chart := string(tmpl)
	start := strings.Index(chart, "rules:")
	end := strings.Index(chart[start:], "---")
	if start < 0 || end < 0 || chart[start:start+end] != wantRules {
		t.Errorf("the chart's manager rules differ from config/rbac/role.yaml:\n%s", chart[start:start+end])
	}
	// The gateway's ClusterRole likewise equals the rules generated from internal/gateway/rbac.go.
	grole, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gtmpl, err := os.ReadFile(filepath.Join(repoRoot, "charts", "connector-mcp", "templates", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantGateway := string(grole[strings.Index(string(grole), "rules:"):])
	gchart := string(gtmpl)
	gstart := strings.Index(gchart, "rules:")
	gend := strings.Index(gchart[max(gstart, 0):], "---")
	if gstart < 0 || gend < 0 || gchart[gstart:gstart+gend] != wantGateway {
		t.Errorf("the chart's gateway rules differ from config/gateway/rbac/role.yaml")
	}
}

// A reviewer sees at a glance, with kubectl alone, what is active and why something is refused.
func TestStoryKubectlShowsWhy(t *testing.T) {
	ns := newNamespace(t, "story-kubectl")
	startOperator(t, ns, devOptions())
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	other := doc.DeepCopy()
	other.Service = apiv1.ServiceIdentity{Ref: "other", ConnectionRef: "other"}
	mustCreate(t, inlineProfile(ns, "other", other))
	ok := newDeployment(ns, "active", "svc", "p-active", live.URL, doc, nil, "all")
	mustCreate(t, ok)
	refused := newDeployment(ns, "refused", "other", "p-refused", "http://127.0.0.9:1/mcp", other, nil, "nobody-granted-this")
	mustCreate(t, refused)
	waitObj(t, ok, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])
	refusedWith(t, refused, "GrantNotFound")

	out, err := kubectlRun(t, nil, "get", "mcpsp,sdep", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	active := rows["servicedeployment.connectors.b10x.io/active"]
	if len(active) < 4 || active[1] != "True" || active[2] != "Activated" || active[3] != doc.Snapshot.Digest {
		t.Errorf("active row = %v\n%s", active, out)
	}
	ref := rows["servicedeployment.connectors.b10x.io/refused"]
	if len(ref) < 3 || ref[1] != "False" || ref[2] != "GrantNotFound" {
		t.Errorf("refused row = %v\n%s", ref, out)
	}
	prof := rows["mcpserviceprofile.connectors.b10x.io/svc"]
	if len(prof) < 4 || prof[1] != "True" || prof[2] != "Verified" || prof[3] != doc.Snapshot.Digest {
		t.Errorf("profile row = %v\n%s", prof, out)
	}

	desc, err := kubectlRun(t, nil, "describe", "sdep", "refused", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl describe: %v\n%s", err, desc)
	}
	for _, want := range []string{"GrantNotFound", `grant RoleBinding "nobody-granted-this" does not exist in this namespace`} {
		if !strings.Contains(desc, want) {
			t.Errorf("kubectl describe lacks %q:\n%s", want, desc)
		}
	}
}
