package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
)

// deploymentProfile writes a reviewed profile of three tools (read, write, destructive) and
// returns its path and document; unreviewed leaves the last effect unreviewed.
func deploymentProfile(t *testing.T, unreviewed bool) (string, *apiv1.ProfileDocument) {
	t.Helper()
	doc := ocipack.Draft(mustSnap(t, "2025-11-25",
		`{"name":"get","inputSchema":{"type":"object"}}`,
		`{"name":"put","inputSchema":{"type":"object"}}`,
		`{"name":"drop","inputSchema":{"type":"object"}}`))
	effects := map[string]apiv1.Effect{"get": apiv1.EffectRead, "put": apiv1.EffectWrite, "drop": apiv1.EffectDestructive}
	for i, op := range doc.Operations {
		doc.Operations[i].Effect = effects[op.RemoteName]
		if unreviewed && op.RemoteName == "drop" {
			doc.Operations[i].Effect = apiv1.EffectUnreviewed
		}
	}
	y, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "profile.yaml")
	if err := os.WriteFile(p, y, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, doc
}

// deployment init writes a ServiceDeployment the real apiserver's schema accepts, binding every
// operation of the profile with the grant and the credential, the destructive one not exposed.
// Must-fail twins: an unreviewed effect is refused by name, a missing grant names the flag, a URL
// with userinfo or plain http to a remote host is a usage error.
func TestDeploymentInit(t *testing.T) {
	c, getenv := reviewEnv(t)
	path, doc := deploymentProfile(t, false)
	code, out, errOut := runServerCLI(t, getenv, "deployment", "init", "--profile", path, "--grant", "invokers",
		"--url", "https://mcp.example.com/mcp", "--credential-secret", "svc-token", "--name", "svc")
	if code != exitOK {
		t.Fatalf("deployment init: exit %d: %s", code, errOut)
	}
	var sd apiv1.ServiceDeployment
	if err := yaml.UnmarshalStrict([]byte(out), &sd); err != nil {
		t.Fatalf("output is not a ServiceDeployment: %v\n%s", err, out)
	}
	if len(sd.Spec.Operations) != len(doc.Operations) {
		t.Fatalf("%d operations bound, profile has %d", len(sd.Spec.Operations), len(doc.Operations))
	}
	for i, b := range sd.Spec.Operations {
		op := doc.Operations[i]
		if b.OperationRef != op.OperationRef || b.EndpointRef != apiv1.EndpointRefMCPConnection || len(b.GrantRefs) != 1 || b.GrantRefs[0] != "invokers" ||
			b.CredentialRef == nil || *b.CredentialRef != (apiv1.CredentialRef{Name: "svc-token", Key: "token"}) || b.Expose != (op.Effect != apiv1.EffectDestructive) {
			t.Errorf("operation %d: %+v for %+v", i, b, op)
		}
	}
	if !strings.Contains(errOut, "is bound but not exposed") {
		t.Errorf("stderr does not name the hidden operation: %s", errOut)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "deployinit-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	sd.Namespace = ns.Name
	if err := c.Create(context.Background(), &sd); err != nil {
		t.Fatalf("the apiserver refuses what deployment init wrote: %v", err)
	}

	unreviewed, _ := deploymentProfile(t, true)
	if code, out, errOut := runServerCLI(t, getenv, "deployment", "init", "--profile", unreviewed, "--grant", "g", "--url", "https://h/mcp"); code != exitRefused ||
		!strings.Contains(errOut, "refused: "+ocipack.RefusalUnreviewed) || out != "" {
		t.Fatalf("unreviewed effect: exit %d: %s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "https://h/mcp"}, `"grant"`},
		{[]string{"--grant", "g", "--url", "https://user:pw@h/mcp"}, "userinfo"},
		{[]string{"--grant", "g", "--url", "http://mcp.example.com/mcp"}, "https"},
		{[]string{"--grant", "Not_A_Name", "--url", "https://h/mcp"}, "--grant"},
		{[]string{"--grant", "g", "--url", "https://h/mcp", "--expose", "some"}, "--expose"},
	} {
		code, out, errOut := runServerCLI(t, getenv, append([]string{"deployment", "init", "--profile", path}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" || strings.Contains(errOut, "pw@") {
			t.Errorf("%v: exit %d, want usage naming %s: %s", tc.args, code, tc.want, errOut)
		}
	}
}
