//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/b10x/connector-mcp/internal/imagebuild"
)

const callerNS = "team-a"

// callerThroughTheService: an agent Pod in a tenant namespace, with a kubelet-projected token of
// the gateway's audience and the gateway's CA mounted from a ConfigMap, reaches the gateway through
// its ClusterIP Service and is authenticated (names and paths as docs/gateway.md and
// config/gateway/example-agent.yaml give them) (the answer is not 401); its twin with a token of
// another audience gets 401.
func (e *env) callerThroughTheService(t *testing.T) {
	ctx := t.Context()
	built, err := imagebuild.Build(ctx, imagebuild.Options{
		ModuleDir: e.root, Binaries: []imagebuild.Binary{{Name: "caller", Package: "./test/e2e/cmd/caller"}},
		Platforms: []string{"linux/amd64"}, SourceDate: time.Unix(315532800, 0).UTC(),
		Source: imagebuild.DefaultSource, Revision: "e2e", Version: "e2e", Entrypoint: "/caller",
	})
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := imagebuild.Push(ctx, built, e.node.Registry+"/e2e/caller", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: callerNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "connectors.b10x.io/gateway-access": "true",
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ConfigMaps(callerNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "connector-mcp-gateway-ca"}, Data: map[string]string{"ca.crt": string(tlsCA.CertPEM())},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ServiceAccounts(callerNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := e.cs.CoreV1().Services(namespace).Get(ctx, release+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := gatewayHosts()[2]
	url := "https://" + host + ":8443/mcp/" + callerNS + "/weather"
	for _, c := range []struct {
		name, audience string
		wantAuth       bool
	}{
		{"agent", "connector-mcp", true},
		{"agent-wrong-audience", "not-the-gateway", false},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: callerNS},
			Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				ServiceAccountName:           "agent",
				AutomountServiceAccountToken: ptr.To(false),
				// No cluster DNS on this node (docs/install.md): the Service's name is pinned to its
				// ClusterIP, so the call goes through kube-proxy's Service routing.
				HostAliases: []corev1.HostAlias{{IP: svc.Spec.ClusterIP, Hostnames: []string{host}}},
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "caller", Image: pushed.Ref, Args: []string{"--url", url},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "connector-mcp-token", MountPath: "/var/run/secrets/connector-mcp", ReadOnly: true},
						{Name: "connector-mcp-gateway-ca", MountPath: "/etc/connector-mcp-ca", ReadOnly: true},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "connector-mcp-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
						ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: c.audience, ExpirationSeconds: ptr.To[int64](600), Path: "token"},
					}}}}},
					{Name: "connector-mcp-gateway-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "connector-mcp-gateway-ca"},
					}}},
				},
			},
		}
		if _, err := e.cs.CoreV1().Pods(callerNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			p, err := e.cs.CoreV1().Pods(callerNS).Get(ctx, c.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s still %s after 3 minutes", c.name, p.Status.Phase)
			}
			time.Sleep(time.Second)
		}
		logs := e.must(ctx, e.kubectl, "logs", "-n", callerNS, c.name)
		var got struct {
			Status int    `json:"status"`
			Serial string `json:"serial"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(logs)), &got); err != nil {
			t.Fatalf("pod %s printed %q: %v", c.name, logs, err)
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(logs))
		switch {
		case got.Status == 0:
			t.Errorf("%s: no HTTP answer through the Service: %s", c.name, got.Error)
		case c.wantAuth && got.Status == 401:
			t.Errorf("%s: a kubelet-projected token of the gateway's audience was refused (401)", c.name)
		case !c.wantAuth && got.Status != 401:
			t.Errorf("%s: a token of another audience got %d, want 401", c.name, got.Status)
		}
	}
	if err := e.cs.CoreV1().Namespaces().Delete(ctx, callerNS, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
