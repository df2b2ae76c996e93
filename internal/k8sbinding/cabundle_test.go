package k8sbinding

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
)

func caConfigMap(name string, labelled bool, data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Data: data}
	if labelled {
		cm.Labels = map[string]string{apiv1.CABundleLabel: "true"}
	}
	return cm
}

// TestBinderCABundle: a binding naming a labelled CA bundle reaches a server of that private CA;
// without the bundle the exchange is refused as tls_unknown_authority; each unusable bundle is
// a named refusal before anything is dialed.
func TestBinderCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		caConfigMap("corp-ca", true, map[string]string{"ca.crt": caPEM}),
		caConfigMap("unlabelled", false, map[string]string{"ca.crt": caPEM}),
		caConfigMap("garbage", true, map[string]string{"ca.crt": "not a certificate"}),
		caConfigMap("key-block", true, map[string]string{"ca.crt": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}),
		caConfigMap("trailing", true, map[string]string{"ca.crt": caPEM + "junk"}),
	).Build()
	b := &Binder{Base: egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, Timeout: 5 * time.Second}, ConfigMaps: cl}
	exchange := func(ref *CABundleRef) error {
		tr, err := b.Transport(context.Background(), Request{Namespace: "team-a", URL: srv.URL + "/mcp", CABundle: ref})
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{}`))
		_, err = tr.Exchange(context.Background(), req)
		return err
	}
	if err := exchange(&CABundleRef{Name: "corp-ca", Key: "ca.crt"}); err != nil {
		t.Fatalf("with the labelled bundle: %v", err)
	}
	var te *egress.TLSError
	if err := exchange(nil); !errors.As(err, &te) || te.Refusal() != egress.RefusalTLSUnknownAuthority {
		t.Fatalf("without a bundle: got %v, want %s", err, egress.RefusalTLSUnknownAuthority)
	}
	for _, c := range []struct {
		ref       CABundleRef
		want      string
		transient bool
	}{
		{CABundleRef{Name: "absent", Key: "ca.crt"}, RefusalCABundleNotFound, true},
		{CABundleRef{Name: "unlabelled", Key: "ca.crt"}, RefusalCABundleNotFound, true},
		{CABundleRef{Name: "corp-ca", Key: "other.crt"}, RefusalCABundleNotFound, true},
		{CABundleRef{Name: "garbage", Key: "ca.crt"}, RefusalCABundleInvalid, false},
		{CABundleRef{Name: "key-block", Key: "ca.crt"}, RefusalCABundleInvalid, false},
		{CABundleRef{Name: "trailing", Key: "ca.crt"}, RefusalCABundleInvalid, false},
	} {
		err := b.Check(context.Background(), Request{Namespace: "team-a", URL: srv.URL + "/mcp", CABundle: &c.ref})
		var ce *CABundleError
		if !errors.As(err, &ce) || ce.Refusal() != c.want || ce.Transient() != c.transient || !errors.Is(err, ErrCABundleRefused) {
			t.Fatalf("%s/%s: got %v, want %s", c.ref.Name, c.ref.Key, err, c.want)
		}
		if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), "junk") {
			t.Fatalf("refusal carries the ConfigMap's contents: %v", err)
		}
	}
	noReader := &Binder{Base: b.Base}
	if err := noReader.Check(context.Background(), Request{Namespace: "team-a", URL: srv.URL, CABundle: &CABundleRef{Name: "corp-ca", Key: "ca.crt"}}); !errors.Is(err, egress.ErrInvalidPolicy) {
		t.Fatalf("no ConfigMap reader: got %v, want ErrInvalidPolicy", err)
	}
}

// TestParseCABundleBound: an oversized bundle is refused before parsing.
func TestParseCABundleBound(t *testing.T) {
	if _, err := ParseCABundle(make([]byte, MaxCABundleBytes+1)); !errors.Is(err, ErrInvalidCABundle) {
		t.Fatalf("got %v, want ErrInvalidCABundle", err)
	}
}
