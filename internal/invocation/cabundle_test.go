package invocation_test

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// A deployment naming its CA bundle (a labelled ConfigMap) is invoked through the egress port
// verified against that bundle; its twin without the bundle is refused tls_unknown_authority
// and the server's certificate prose never reaches the caller.
func TestCABundleInvocation(t *testing.T) {
	srv := mcptest.StartHTTPS(mcptest.NewServer("files", testTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	doc := freezeWith(t, srv.URL, srv.Client())
	// Every httptest TLS server presents the same certificate: take it from a throwaway one.
	probe := httptest.NewTLSServer(nil)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: probe.Certificate().Raw}))
	probe.Close()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	cms := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "corp-ca", Labels: map[string]string{apiv1.CABundleLabel: "true"}},
		Data:       map[string]string{"ca.crt": caPEM},
	}).Build()
	invoke := func(bundle *apiv1.ConfigMapKeyRef) error {
		api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
		opts := loopbackOptions(api)
		opts.Connector = &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, ConfigMaps: cms}
		dep := deployment(doc, srv.URL)
		dep.Spec.MCPConnection.CABundleRef = bundle
		s, err := invocation.NewSurface(doc, dep, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		d, err := s.Describe(context.Background(), alice, "echo", "files")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
		return err
	}
	if err := invoke(&apiv1.ConfigMapKeyRef{Name: "corp-ca", Key: "ca.crt"}); err != nil {
		t.Fatalf("with the CA bundle: %v", err)
	}
	err := invoke(nil)
	if refusal(err) != egress.RefusalTLSUnknownAuthority {
		t.Fatalf("without the CA bundle: got %v (refusal %q), want %s", err, refusal(err), egress.RefusalTLSUnknownAuthority)
	}
	if strings.Contains(err.Error(), "x509") || strings.Contains(err.Error(), "Acme") {
		t.Fatalf("the error carries certificate prose: %v", err)
	}
}
