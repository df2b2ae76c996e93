package envtest

// The shipped Argo CD health check (config/argocd/health.lua) run with a Lua interpreter against
// real objects captured from the GitOps story, the way Argo CD runs it (obj in, {status, message}
// out).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// toLua converts decoded JSON into Lua values as Argo CD does (objects and arrays become tables).
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case nil:
		return lua.LNil
	}
	return lua.LNil
}

// argoHealth runs script with obj = u and returns the status and message it reports.
func argoHealth(t *testing.T, script string, u *unstructured.Unstructured) (string, string) {
	t.Helper()
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, u.Object))
	if err := L.DoString(script); err != nil {
		t.Fatalf("health.lua: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %s, want a table", L.Get(-1).Type())
	}
	return ret.RawGetString("status").String(), ret.RawGetString("message").String()
}

func argoScript(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestArgoCDHealthOnRealObjects: Progressing before the operator acts and for a generation it
// has not seen, Healthy when active or verified, Degraded on a drift refusal, Suspended for
// spec.suspend: true.
func TestArgoCDHealthOnRealObjects(t *testing.T) {
	script := argoScript(t)
	s := runGitOpsStory(t)
	newer := s.readyDeployment.DeepCopy()
	newer.SetGeneration(newer.GetGeneration() + 1)
	for _, tc := range []struct {
		name    string
		obj     *unstructured.Unstructured
		want    string
		message string
	}{
		{"unreconciled", s.unreconciledDeployment, "Progressing", "Waiting for the operator"},
		{"unseen generation", newer, "Progressing", "Waiting for the operator"},
		{"verified profile", s.readyProfile, "Healthy", "Verified"},
		{"active deployment", s.readyDeployment, "Healthy", "Activated"},
		{"drift refused", s.driftRefused, "Degraded", "SnapshotDrift"},
		{"suspended", s.suspended, "Suspended", "suspended"},
	} {
		got, msg := argoHealth(t, script, tc.obj)
		if got != tc.want || !strings.Contains(msg, tc.message) {
			t.Errorf("%s: health %s (%q), want %s containing %q", tc.name, got, msg, tc.want, tc.message)
		}
	}
}

// TestArgoCDConfigMapCarriesTheScript: both argocd-cm keys hold health.lua unchanged.
func TestArgoCDConfigMapCarriesTheScript(t *testing.T) {
	script := argoScript(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "argocd", "argocd-cm-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"McpServiceProfile", "ServiceDeployment", "McpCredential"} {
		key := "resource.customizations.health.connectors.b10x.io_" + kind
		if cm.Data[key] != script {
			t.Errorf("argocd-cm %s differs from config/argocd/health.lua", key)
		}
	}
}
