package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

func TestEndpointURLRefusal(t *testing.T) {
	for raw, want := range map[string]string{
		"https://mcp.example.com/mcp":                    "",
		"https://mcp.example.com/mcp?tenant=a&next=b@c":  "",
		"https://mcp.example.com/u/@me":                  "",
		"https://user:pass@mcp.example.com/mcp":          RefusalEndpointUserinfo,
		"https://token@mcp.example.com/mcp":              RefusalEndpointUserinfo,
		"https://:pass@mcp.example.com":                  RefusalEndpointUserinfo,
		"https://mcp.example.com/mcp#access_token=x":     RefusalEndpointFragment,
		"https://mcp.example.com/mcp#":                   RefusalEndpointFragment,
		"https://mcp.example.com/mcp?q=1#frag":           RefusalEndpointFragment,
		"https://a@mcp.example.com/mcp#also-a-fragment":  RefusalEndpointUserinfo,
		"http://127.0.0.1:8080/mcp?api-version=2026-1-1": "",
	} {
		if got := endpointURLRefusal(raw); got != want {
			t.Errorf("%s: got %q, want %q", raw, got, want)
		}
	}
}

// TestEndpointWithUserinfoRefusedByController: a deployment written before the CRD's CEL rule
// existed (the fake API server runs no CEL) with a password in its URL is refused by the Bound
// stage, naming the field and the refusal, never the password; nothing is dialed. Its twin, a
// URL with a query string, activates.
func TestEndpointWithUserinfoRefusedByController(t *testing.T) {
	for _, c := range []struct {
		url, refusal string
	}{
		{"https://svc-user:hunter2@mcp.example.com/mcp", RefusalEndpointUserinfo},
		{"https://mcp.example.com/mcp#hunter2", RefusalEndpointFragment},
	} {
		_, objs := world(t)
		objs[len(objs)-1].(*v1.ServiceDeployment).Spec.MCPConnection.URL = c.url
		h := newHarness(t, objs...)
		h.freezer.set(liveSnapshot(t, "2026-07-28", toolB, toolA2), nil)
		h.reconcileProfile("svc")
		h.reconcileDeployment("sd")
		sd := h.deployment("sd")
		bound := cond(sd.Status.Conditions, v1.ConditionBound)
		if bound.Status != metav1.ConditionFalse || bound.Reason != v1.ReasonEndpointRefused ||
			!strings.Contains(bound.Message, c.refusal) || !strings.Contains(bound.Message, "spec.mcpConnection.url") {
			t.Fatalf("%s: Bound = %+v", c.refusal, bound)
		}
		if stalled := cond(sd.Status.Conditions, v1.ConditionStalled); stalled.Status != metav1.ConditionTrue {
			t.Fatalf("%s: not stalled (a human must fix the spec): %+v", c.refusal, stalled)
		}
		for _, cd := range sd.Status.Conditions {
			if strings.Contains(cd.Message, "hunter2") {
				t.Fatalf("%s: condition %s carries the secret: %q", c.refusal, cd.Type, cd.Message)
			}
		}
		if h.freezer.count() != 0 {
			t.Fatalf("%s: the endpoint was dialed %d times", c.refusal, h.freezer.count())
		}
	}

	_, objs := world(t)
	objs[len(objs)-1].(*v1.ServiceDeployment).Spec.MCPConnection.URL = "https://mcp.example.com/mcp?tenant=a"
	h := newHarness(t, objs...)
	h.activate()
}

func caMap(name string, labelled bool, data string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": data}}
	if labelled {
		cm.Labels = map[string]string{v1.CABundleLabel: "true"}
	}
	return cm
}

// testCAPEM is a self-signed CA certificate (any parseable certificate will do here: the bind
// stage checks the bundle, the freezer uses it).
const testCAPEM = `-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIQIRi6zePL6mKjOipn+dNuaTAKBggqhkjOPQQDAjASMRAw
DgYDVQQKEwdBY21lIENvMB4XDTE3MTAyMDE5NDMwNloXDTE4MTAyMDE5NDMwNlow
EjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD0d
7VNhbWvZLWPuj/RtHFjvtJBEwOkhbN/BnnE8rnZR8+sbwnc/KhCk3FhnpHZnQz7B
5aETbbIgmuvewdjvSBSjYzBhMA4GA1UdDwEB/wQEAwICpDATBgNVHSUEDDAKBggr
BgEFBQcDATAPBgNVHRMBAf8EBTADAQH/MCkGA1UdEQQiMCCCDmxvY2FsaG9zdDo1
NDUzgg4xMjcuMC4wLjE6NTQ1MzAKBggqhkjOPQQDAgNIADBFAiEA2zpJEPQyz6/l
Wf86aX6PepsntZv2GYlA5UpabfT2EZICICpJ5h/iI+i341gBmLiAFQOyTDT+/wQc
6MF9+Yw1Yy0t
-----END CERTIFICATE-----
`

// TestCABundleRef: a deployment naming a labelled CA bundle ConfigMap activates and its freeze
// request carries the reference; an absent (or unlabelled) bundle is a retried CABundleNotFound
// and an unusable one a Stalled EndpointRefused, both before anything is dialed.
func TestCABundleRef(t *testing.T) {
	run := func(cm client.Object) *harness {
		_, objs := world(t)
		objs[len(objs)-1].(*v1.ServiceDeployment).Spec.MCPConnection.CABundleRef = &v1.ConfigMapKeyRef{Name: "corp-ca", Key: "ca.crt"}
		if cm != nil {
			objs = append(objs, cm)
		}
		return newHarness(t, objs...)
	}
	h := run(caMap("corp-ca", true, testCAPEM))
	h.activate()
	if got := h.freezer.last.CABundle; got == nil || got.Name != "corp-ca" || got.Key != "ca.crt" {
		t.Fatalf("freeze request CA bundle = %+v", got)
	}

	for _, c := range []struct {
		name      string
		cm        client.Object
		reason    string
		refusal   string
		transient bool
	}{
		{"absent", nil, v1.ReasonCABundleNotFound, k8sbinding.RefusalCABundleNotFound, true},
		{"unlabelled", caMap("corp-ca", false, testCAPEM), v1.ReasonCABundleNotFound, k8sbinding.RefusalCABundleNotFound, true},
		{"not PEM", caMap("corp-ca", true, "hello"), v1.ReasonEndpointRefused, k8sbinding.RefusalCABundleInvalid, false},
	} {
		h := run(c.cm)
		h.freezer.set(liveSnapshot(t, "2026-07-28", toolB, toolA2), nil)
		h.reconcileProfile("svc")
		res := h.reconcileDeployment("sd")
		sd := h.deployment("sd")
		bound := cond(sd.Status.Conditions, v1.ConditionBound)
		if bound.Status != metav1.ConditionFalse || bound.Reason != c.reason || !strings.Contains(bound.Message, c.refusal) {
			t.Fatalf("%s: Bound = %+v", c.name, bound)
		}
		if (res.RequeueAfter > 0) != c.transient {
			t.Fatalf("%s: requeue %v, want transient=%v", c.name, res.RequeueAfter, c.transient)
		}
		if h.freezer.count() != 0 {
			t.Fatalf("%s: dialed before the bundle was usable", c.name)
		}
	}
}
