package envtest

// Story: a platform team grants one agent "invoke" on one ServiceDeployment with a Role and a
// RoleBinding. Invocation authorizes each caller with a SubjectAccessReview decided by the real
// apiserver, and `kubectl auth can-i invoke servicedeployments/NAME` gives the same answer for
// every caller and deployment.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

func TestStoryKubectlAuthCanIAgreesWithInvoke(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "invoke")
	srv := mcptest.StartHTTP(mcptest.NewServer("files", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	doc := reviewedProfile(t, srv.URL)

	// Two deployments of the same profile; the operator's activation is written by hand here
	// (status subresource, as the operator writes it).
	deps := map[string]*apiv1.ServiceDeployment{}
	for _, name := range []string{"files", "files-admin"} {
		deps[name] = createActivated(t, ns, name, srv.URL, doc)
	}

	// The grant: agent may invoke "files" only. "auditor" may invoke every deployment of the
	// namespace (empty resourceNames). "other" has nothing.
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoke-files"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"connectors.b10x.io"}, Resources: []string{"servicedeployments"},
			ResourceNames: []string{"files"}, Verbs: []string{"invoke"}}}})
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoke-all"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"connectors.b10x.io"}, Resources: []string{"servicedeployments"},
			Verbs: []string{"invoke"}}}})
	bind := func(name, role, sa string) {
		create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}}})
	}
	bind("agents-invoke-files", "invoke-files", "agent")
	bind("auditors-invoke-all", "invoke-all", "auditor")

	opts := invocation.Options{
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: &invocation.SubjectAccessReviewer{Client: k8sClient},
		Schemas:    invocation.NewSchemaCache(),
	}
	surfaces := map[string]*invocation.Surface{}
	for name, dep := range deps {
		s, err := invocation.NewSurface(doc, dep, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		surfaces[name] = s
	}

	want := map[[2]string]bool{
		{"agent", "files"}: true, {"agent", "files-admin"}: false,
		{"auditor", "files"}: true, {"auditor", "files-admin"}: true,
		{"other", "files"}: false, {"other", "files-admin"}: false,
	}
	for k, allowed := range want {
		sa, dep := k[0], k[1]
		user := "system:serviceaccount:" + ns + ":" + sa
		if got := canI(t, ns, dep, user); got != allowed {
			t.Fatalf("kubectl auth can-i invoke servicedeployments/%s as %s = %v, want %v", dep, sa, got, allowed)
		}
		// The caller as a TokenReview would present the ServiceAccount.
		caller := invocation.Caller{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			Seed: "serviceaccount:" + ns + "/" + sa}
		err := invoke(ctx, surfaces[dep], caller)
		switch {
		case allowed && err != nil:
			t.Fatalf("%s on %s: kubectl says yes, Invoke says %v", sa, dep, err)
		case !allowed && !errors.Is(err, invocation.ErrForbidden):
			t.Fatalf("%s on %s: kubectl says no, Invoke says %v", sa, dep, err)
		}
	}

	// Revoking the binding revokes invocation at the next call, the same lease notwithstanding.
	agent := invocation.Caller{User: "system:serviceaccount:" + ns + ":agent", Seed: "serviceaccount:" + ns + "/agent"}
	d, err := surfaces["files"].Describe(ctx, agent, "echo", "files")
	if err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents-invoke-files"}}
	if err := k8sClient.Delete(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if canI(t, ns, "files", agent.User) {
		t.Fatal("kubectl still says yes after the RoleBinding is gone")
	}
	_, err = surfaces["files"].Invoke(ctx, invocation.Request{Caller: agent, Lease: d.Lease, Operation: "echo", Connection: "files"})
	if !errors.Is(err, invocation.ErrForbidden) {
		t.Fatalf("after revocation: %v", err)
	}
}

// invoke describes and invokes "echo" as caller.
func invoke(ctx context.Context, s *invocation.Surface, caller invocation.Caller) error {
	d, err := s.Describe(ctx, caller, "echo", "files")
	if err != nil {
		return err
	}
	_, err = s.Invoke(ctx, invocation.Request{Caller: caller, Lease: d.Lease, Operation: "echo", Connection: "files",
		Arguments: json.RawMessage(`{"text":"hi"}`)})
	return err
}

// canI runs the real kubectl: kubectl auth can-i invoke servicedeployments/NAME -n NS --as USER,
// as docs/invocation.md tells users to, and the fully qualified resource form, which must agree.
func canI(t *testing.T, ns, name, user string) bool {
	t.Helper()
	short := canIAs(t, "servicedeployments/"+name, ns, user)
	if full := canIAs(t, "servicedeployments.connectors.b10x.io/"+name, ns, user); full != short {
		t.Fatalf("kubectl auth can-i: short form %v, qualified form %v", short, full)
	}
	return short
}

func canIAs(t *testing.T, resource, ns, user string) bool {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(cluster.BinDir, "kubectl"), "--kubeconfig", kubeconfig,
		"auth", "can-i", "invoke", resource, "-n", ns, "--as", user)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	answer := strings.TrimSpace(out.String())
	var exit *exec.ExitError
	switch {
	case err == nil && answer == "yes":
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1 && answer == "no":
		return false
	}
	t.Fatalf("kubectl auth can-i %s: %v: %q %q", resource, err, answer, stderr.String())
	return false
}

// reviewedProfile freezes url and reviews every operation as "read".
func reviewedProfile(t *testing.T, url string) *apiv1.ProfileDocument {
	t.Helper()
	s, err := mcpclient.NewClient(nil).Connect(context.Background(), mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(snap)
	for i := range doc.Operations {
		doc.Operations[i].Effect = apiv1.EffectRead
	}
	return doc
}

// createActivated creates a ServiceDeployment exposing every operation of doc through the
// apiserver (CRD validation applies) and writes the status the operator writes on activation.
func createActivated(t *testing.T, ns, name, url string, doc *apiv1.ProfileDocument) *apiv1.ServiceDeployment {
	t.Helper()
	sd := &apiv1.ServiceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apiv1.ServiceDeploymentSpec{
			ProfileRef: apiv1.LocalObjectReference{Name: "files"}, ProviderID: name,
			MCPConnection: apiv1.MCPConnection{URL: url},
		},
	}
	for _, o := range doc.Operations {
		sd.Spec.Operations = append(sd.Spec.Operations, apiv1.OperationBinding{
			OperationRef: o.OperationRef, EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{"agents-invoke-files"}, Expose: true,
		})
	}
	create(t, sd)
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		t.Fatal(err)
	}
	sd.Status = apiv1.ServiceDeploymentStatus{
		ObservedGeneration: sd.Generation, ActiveSnapshotDigest: doc.Snapshot.Digest, ProfileDigest: pd,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Activated",
			ObservedGeneration: sd.Generation, LastTransitionTime: metav1.Now()}},
	}
	if err := k8sClient.Status().Update(context.Background(), sd); err != nil {
		t.Fatal(err)
	}
	got := &apiv1.ServiceDeployment{}
	if err := k8sClient.Get(context.Background(), clientKey(ns, name), got); err != nil {
		t.Fatal(err)
	}
	return got
}
