package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/activation"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// forbiddenSecrets answers every Secret read with 403, as the apiserver does for the gateway in
// a namespace that did not consent; other reads pass.
type forbiddenSecrets struct{ client.Reader }

func (f forbiddenSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New(`User "gw" cannot get resource "secrets"`))
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

// TestVerifyPackSecretConsentMissing: a pull secret the verifier may not read (the gateway in a
// namespace without consent) is a transient RegistryUnavailable naming
// credential_consent_missing, without the apiserver's text, and nothing is sent to the
// registry; the twin with consent (the plain reader) verifies.
func TestVerifyPackSecretConsentMissing(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true, Username: "robot", Password: "hunter2-registry"})
	t.Cleanup(reg.Close)
	cfg := fmt.Appendf(nil, `{"auths":{%q:{"username":"robot","password":"hunter2-registry"}}}`, reg.Host)
	pusher, err := ociregistry.CredentialsFromDockerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := strings.Cut(reg.Host, ":")
	w := &trustWorld{reg: reg, c: &ociregistry.Client{PlainHTTP: true, Credentials: pusher}, platform: newTestKey(t), team: newTestKey(t)}
	w.secrets = []client.Object{secretFixture("pull", corev1.SecretTypeDockerConfigJson, true, host, map[string][]byte{corev1.DockerConfigJsonKey: cfg})}
	pack := w.pack(t, w.platform, platformRepo, mainRef)
	verifier := func(forbid bool) *PackVerifier {
		v := w.verifier(t, true)
		anon := &ociregistry.Client{PlainHTTP: true}
		v.Registry, v.Verifier = *anon, ociregistry.NewVerifier(anon, nil)
		v.NewVerifier = func(c *ociregistry.Client) *ociregistry.Verifier {
			return ociregistry.NewVerifier(c, nil, ociregistry.WithCacheSize(0))
		}
		if forbid {
			v.Secrets = forbiddenSecrets{v.Secrets}
		}
		return v
	}
	req := activation.VerifyRequest{Namespace: "team-a", Ref: pack, PullSecret: &v1.LocalObjectReference{Name: "pull"}}

	before := reg.Requests()
	_, err = verifier(true).VerifyPack(ctx, req)
	serr := activation.ClassifyVerifyError(req, err)
	if serr == nil || serr.Reason() != v1.ReasonRegistryUnavailable || !serr.Transient() ||
		!strings.Contains(serr.Message(), k8sbinding.RefusalCredentialConsentMissing) || strings.Contains(serr.Message(), "cannot get") {
		t.Fatalf("without consent: %v (%+v)", err, serr)
	}
	if n := reg.Requests() - before; n != 0 {
		t.Fatalf("%d request(s) reached the registry without the pull secret's consent", n)
	}
	if vs, err := verifier(false).VerifyPack(ctx, req); err != nil || vs.Provenance.TrustSource != TrustSourcePlatform {
		t.Fatalf("with consent: %+v %v", vs, err)
	}
}
