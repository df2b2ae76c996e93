package envtest

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// auditBearerFlag is the flag the chart passes for audit.webhookBearerSecret.
const auditBearerFlag = "--audit-webhook-bearer-file=/etc/connector-mcp-audit-webhook/token" //nolint:gosec // a flag and a mount path, not a credential

// TestChartAuditWebhook: a webhook audit.sink reaches both the manager and the gateway as
// --audit-log, and webhookBearerSecret is mounted into both as the file
// --audit-webhook-bearer-file names; the args parse with each binary's flags. The twin: a bearer
// Secret beside a non-webhook sink renders no bearer flag and no mount (the binaries would refuse
// the flag without a webhook).
func TestChartAuditWebhook(t *testing.T) {
	objs := objects(t, render(t, "aw", "aw-ns", chartMatrix["audit-webhook"]))
	args := deploymentArgs(t, objs)
	for _, role := range []string{"manager", "gateway"} {
		if p := argProblems(args[role], []string{`--audit-log=https://audit.example.com/ingest`, auditBearerFlag}); len(p) > 0 {
			t.Errorf("%s: %v", role, p)
		}
	}
	fs, _ := managerFlagSet()
	for role, fs := range map[string]*pflag.FlagSet{"manager": fs, "gateway": gatewayFlagSet()} {
		if err := fs.Parse(asStrings(args[role])); err != nil {
			t.Errorf("the rendered %s args do not parse: %v", role, err)
		}
	}
	mounted := auditBearerMounts(objs)
	if len(mounted) != 2 {
		t.Errorf("audit-token mounted at /etc/connector-mcp-audit-webhook in %v, want both Deployments", mounted)
	}

	values := map[string]any{"audit": map[string]any{"sink": "stdout", "webhookBearerSecret": map[string]any{"name": "audit-token"}},
		"gateway": map[string]any{"enabled": true, "plainHTTPUnsafe": true}}
	objs = objects(t, render(t, "aw", "aw-ns", values))
	for role, a := range deploymentArgs(t, objs) {
		if slices.Contains(asStrings(a), auditBearerFlag) {
			t.Errorf("%s: the bearer flag renders without a webhook sink", role)
		}
	}
	if m := auditBearerMounts(objs); len(m) != 0 {
		t.Errorf("the bearer Secret is mounted without a webhook sink: %v", m)
	}
}

// auditBearerMounts names the Deployments that mount the audit-token Secret's "token" key at
// /etc/connector-mcp-audit-webhook.
func auditBearerMounts(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		volume := ""
		for _, v := range vols {
			vm := v.(map[string]any)
			if name, _, _ := unstructured.NestedString(vm, "secret", "secretName"); name == "audit-token" {
				items, _, _ := unstructured.NestedSlice(vm, "secret", "items")
				if len(items) == 1 && items[0].(map[string]any)["key"] == "token" && items[0].(map[string]any)["path"] == "token" {
					volume, _ = vm["name"].(string)
				}
			}
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		mounts, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
		for _, m := range mounts {
			mm := m.(map[string]any)
			if volume != "" && mm["name"] == volume && mm["mountPath"] == "/etc/connector-mcp-audit-webhook" && mm["readOnly"] == true {
				out = append(out, o.GetName())
			}
		}
	}
	return out
}
