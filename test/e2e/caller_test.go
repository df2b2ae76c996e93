//go:build e2e

package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const callerNS = "team-a"

// agentOutcome is the last JSON line an agent Pod (test/e2e/cmd/caller) prints.
type agentOutcome struct {
	Status    int      `json:"status"`
	Serial    string   `json:"serial"`
	Error     string   `json:"error"`
	Protocol  string   `json:"protocol"`
	Tools     []string `json:"tools"`
	Text      string   `json:"text"`
	IsError   bool     `json:"isError"`
	CallError string   `json:"callError"`
	Calls     int      `json:"calls"`
	Retried   int      `json:"retried"`
	Failed    int      `json:"failed"`
}

// agentPod is an agent Pod in the team's namespace as docs/gateway.md and
// config/gateway/example-agent.yaml wire it: the agent ServiceAccount, a kubelet-projected token
// of audience in /var/run/secrets/connector-mcp, the gateway's CA bundle ConfigMap in
// /etc/connector-mcp-ca, restricted Pod Security. There is no cluster DNS on this node
// (docs/install.md): the gateway Service's name is pinned to its ClusterIP with hostAliases, so
// the call goes through kube-proxy's Service routing.
func (e *env) agentPod(t *testing.T, name, audience string, args ...string) *corev1.Pod {
	t.Helper()
	svc, err := e.cs.CoreV1().Services(namespace).Get(t.Context(), release+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := gatewayHosts()[2]
	url := "https://" + host + ":8443/mcp/" + callerNS + "/weather"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: callerNS},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			ServiceAccountName:           "agent",
			AutomountServiceAccountToken: ptr.To(false),
			HostAliases:                  []corev1.HostAlias{{IP: svc.Spec.ClusterIP, Hostnames: []string{host}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "caller", Image: e.act.callerImage, Args: append([]string{"--url", url}, args...),
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "connector-mcp-token", MountPath: "/var/run/secrets/connector-mcp", ReadOnly: true},
					{Name: "connector-mcp-gateway-ca", MountPath: "/etc/connector-mcp-ca", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "connector-mcp-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
					ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: ptr.To[int64](600), Path: "token"},
				}}}}},
				{Name: "connector-mcp-gateway-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "connector-mcp-gateway-ca"},
				}}},
			},
		},
	}
}

// createPod creates pod.
func (e *env) createPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.cs.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startAgent creates the agent Pod.
func (e *env) startAgent(t *testing.T, name, audience string, args ...string) {
	t.Helper()
	e.createPod(t, e.agentPod(t, name, audience, args...))
}

// podLogs waits for the team's Pod name to end and returns the last line it printed.
func (e *env) podLogs(t *testing.T, name string, within time.Duration) string {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(within)
	for {
		p, err := e.cs.CoreV1().Pods(callerNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still %s after %s", name, p.Status.Phase, within)
		}
		time.Sleep(time.Second)
	}
	logs := strings.TrimSpace(e.must(t, e.kubectl, "logs", "-n", callerNS, name))
	t.Logf("%s: %s", name, logs)
	lines := strings.Split(logs, "\n")
	return lines[len(lines)-1]
}

// agentResult waits for the agent Pod to end and decodes the last line it printed.
func (e *env) agentResult(t *testing.T, name string, within time.Duration) agentOutcome {
	t.Helper()
	line := e.podLogs(t, name, within)
	var got agentOutcome
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("pod %s printed %q: %v", name, line, err)
	}
	return got
}

// reviewedNames are the reviewed operations the deployment exposes, sorted.
func (e *env) reviewedNames() []string {
	names := []string{e.act.ops["echo"], e.act.ops["get_forecast"]}
	slices.Sort(names)
	return names
}

// runAgent runs an agent Pod to its end.
func (e *env) runAgent(t *testing.T, name, audience string, args ...string) agentOutcome {
	t.Helper()
	e.startAgent(t, name, audience, args...)
	return e.agentResult(t, name, 3*time.Minute)
}

// callerThroughTheService: the agent Pod reaches the gateway through its ClusterIP Service,
// verifying it with the mounted CA bundle, is authenticated by its projected token, and with the
// go-sdk client lists exactly the reviewed operations and calls one through to the upstream Pod;
// its twin with a token of another audience gets 401.
func (e *env) callerThroughTheService(t *testing.T) {
	got := e.runAgent(t, "agent", "connector-mcp", "--call", e.act.ops["get_forecast"], "--args", `{"city":"Oslo"}`)
	switch {
	case got.Status != 200:
		t.Errorf("agent: tools/list through the Service answered %d (%s), want 200", got.Status, got.Error)
	case got.CallError != "" || got.IsError:
		t.Errorf("agent: the reviewed operation's call failed: %+v", got)
	case !strings.Contains(got.Text, "Oslo"):
		t.Errorf("agent: the upstream's answer did not come through: %q", got.Text)
	}
	want := e.reviewedNames()
	slices.Sort(got.Tools)
	if !slices.Equal(got.Tools, want) {
		t.Errorf("agent: listed %v, want exactly the reviewed operations %v", got.Tools, want)
	}
	if twin := e.runAgent(t, "agent-wrong-audience", "not-the-gateway"); twin.Status != 401 {
		t.Errorf("a token of another audience got %d (%s), want 401", twin.Status, twin.Error)
	}
}
