package envtest

// User story: an MCP server behind an in-house CA, reachable only with its bundle.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// privateCA is an in-house CA and a server certificate it issued for 127.0.0.1.
type privateCA struct {
	pem  string
	leaf tls.Certificate
}

func newPrivateCA(t testing.TB) *privateCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"Example In-House CA"}, CommonName: "in-house root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "mcp.in-house.example"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &privateCA{
		pem:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		leaf: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey},
	}
}

// serveTLS serves h over TLS with the CA's server certificate; hits counts requests that got
// past the handshake.
func (ca *privateCA) serveTLS(t testing.TB, h http.Handler) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = &atomic.Int32{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf}, MinVersion: tls.VersionTLS12}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", hits
}

// A platform team runs an MCP server behind its in-house CA. Bound without the CA, the freeze is
// refused by name (tls_unknown_authority), Stalled, with no certificate prose in status, and the
// server receives no request. The team names a CA bundle: until a ConfigMap of that name exists
// AND carries connectors.b10x.io/ca-bundle=true the deployment waits (CABundleNotFound, retried);
// once labelled, the manager sees it and the deployment activates through egress.
func TestStoryPrivateCAUpstream(t *testing.T) {
	ns := newNamespace(t, "story-private-ca")
	op := startOperator(t, ns, devOptions())
	ca := newPrivateCA(t)
	_, h := modernServer(mcptest.DefaultTools())
	url, hits := ca.serveTLS(t, h)
	// The reviewer froze the same server from inside the trusted network.
	plain := startSwitchable(t, h)
	doc := reviewedProfile(t, plain.URL)

	makeGrant(t, ns, "agents-invoke", "in-house")
	mustCreate(t, inlineProfile(ns, "in-house", doc))
	sd := newDeployment(ns, "in-house", "in-house", "in-house-prod", url, doc, nil, "agents-invoke")
	mustCreate(t, sd)

	sd = waitObj(t, sd, storyTimeout, "refused without the CA bundle", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionSnapshotFrozen, metav1.ConditionFalse, apiv1.ReasonFreezeRefused)
	})
	msg := condOf(sd, apiv1.ConditionSnapshotFrozen).Message
	if !strings.Contains(msg, egress.RefusalTLSUnknownAuthority) {
		t.Fatalf("SnapshotFrozen message = %q, want %s", msg, egress.RefusalTLSUnknownAuthority)
	}
	if !hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonFreezeRefused) || sd.Status.ActiveSnapshotDigest != "" {
		t.Fatalf("not stalled or active: %s", describeStatus(sd))
	}
	for _, c := range sd.Status.Conditions {
		for _, prose := range []string{"x509", "In-House CA", "in-house root", "mcp.in-house.example"} {
			if strings.Contains(c.Message, prose) {
				t.Fatalf("condition %s carries certificate prose %q: %q", c.Type, prose, c.Message)
			}
		}
	}
	waitEvent(t, ns, "in-house", "Warning/"+apiv1.ReasonFreezeRefused)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server received %d requests without a verified handshake", n)
	}

	// The team names its CA bundle; the ConfigMap does not exist yet.
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) {
		sd.Spec.MCPConnection.CABundleRef = &apiv1.ConfigMapKeyRef{Name: "in-house-ca", Key: "ca.crt"}
	})
	sd = waitObj(t, sd, storyTimeout, "waiting for the CA bundle", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonCABundleNotFound)
	})
	if msg := condOf(sd, apiv1.ConditionBound).Message; !strings.Contains(msg, k8sbinding.RefusalCABundleNotFound) || !strings.Contains(msg, apiv1.CABundleLabel) {
		t.Fatalf("Bound message = %q", msg)
	}
	if !hasCondition(sd, apiv1.ConditionReconciling, metav1.ConditionTrue, apiv1.ReasonCABundleNotFound) {
		t.Fatalf("a missing bundle is retried, not stalled: %s", describeStatus(sd))
	}

	// An unlabelled ConfigMap is invisible to the manager: still waiting.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-house-ca"}, Data: map[string]string{"ca.crt": ca.pem}}
	passes := op.reconciles(ns + "/" + sd.Name)
	mustCreate(t, cm)
	waitPasses(t, op, ns+"/"+sd.Name, passes, 2, deploymentController) // two retries pass; nothing changes
	sd = waitObj(t, sd, storyTimeout, "still waiting", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonCABundleNotFound)
	})

	// Labelled: the manager sees the bundle, verifies the server against it and activates.
	mutate(t, cm, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{apiv1.CABundleLabel: "true"} })
	sd = waitObj(t, sd, storyTimeout, "Ready with the CA bundle", isReady[*apiv1.ServiceDeployment])
	if sd.Status.ActiveSnapshotDigest != doc.Snapshot.Digest {
		t.Fatalf("active %q, want %q", sd.Status.ActiveSnapshotDigest, doc.Snapshot.Digest)
	}
	if hits.Load() == 0 {
		t.Fatal("the private-CA server was never reached")
	}
	if strings.Contains(mustJSON(t, sd), "BEGIN CERTIFICATE") {
		t.Fatal("the bundle reached the deployment object")
	}
}
