package envtest

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// The manager's and the gateway's metrics (appoptions.Metrics, both binaries' defaults) answer
// only a caller the apiserver authenticates and authorizes for `get` on /metrics: no token is
// 401, a ServiceAccount without the metrics-reader rule is 403, one bound to it reads the metrics;
// HTTP/2 is not offered. Twin: --metrics-secure=false serves anyone (development only).
func TestStoryMetricsNeedAuthenticationAndAuthorization(t *testing.T) {
	ns := newNamespace(t, "metrics-auth")
	for _, sa := range []string{"scraper", "stranger"} {
		mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	mustCreate(t, role)
	mustCreate(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s: %v", sa, err)
		}
		return tr.Status.Token
	}

	serve := func(m appoptions.Metrics) string {
		l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		m.BindAddress = addr
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: m.ServerOptions(), HealthProbeBindAddress: "0"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return addr
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}, //nolint:gosec // the server's self-signed certificate; the test checks its authorization, not its name
		ForceAttemptHTTP2: true}}
	get := func(url, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		var status int
		var proto string
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := client.Do(req)
			if err == nil {
				status, proto = resp.StatusCode, resp.Proto
				resp.Body.Close()
				return status, proto
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", url, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	url := "https://" + serve(appoptions.DefaultMetrics("")) + "/metrics"
	if status, _ := get(url, ""); status != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d, want 401", status)
	}
	if status, _ := get(url, token("stranger")); status != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the metrics-reader rule: HTTP %d, want 403", status)
	}
	if status, proto := get(url, token("scraper")); status != http.StatusOK || proto != "HTTP/1.1" {
		t.Errorf("the scraper: HTTP %d over %s, want 200 over HTTP/1.1", status, proto)
	}

	open := appoptions.DefaultMetrics("")
	open.Secure = false
	if status, _ := get("http://"+serve(open)+"/metrics", ""); status != http.StatusOK {
		t.Errorf("twin: --metrics-secure=false: HTTP %d, want 200 to anyone", status)
	}
}
