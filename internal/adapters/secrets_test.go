package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/activation"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// secretFixture is a Secret of team-a; opted carries the credential label, hosts the
// allowed-hosts annotation.
func secretFixture(name string, typ corev1.SecretType, opted bool, hosts string, data map[string][]byte) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Type: typ, Data: data}
	if opted {
		s.Labels = map[string]string{v1.CredentialLabel: "true"}
	}
	if hosts != "" {
		s.Annotations = map[string]string{v1.CredentialAllowedHostsAnnotation: hosts}
	}
	return s
}

// wantSecretRefused asserts a CredentialRefused refusal naming the k8sbinding refusal and
// carrying no Secret data.
func wantSecretRefused(t *testing.T, err error, name string, secretData ...string) {
	t.Helper()
	serr := staged(err)
	// A Secret that does not exist or is not labelled yet may arrive in the same apply: the
	// profile waits for it (CredentialNotFound); any other refusal stands (CredentialRefused).
	reason, waits := v1.ReasonCredentialRefused, name == k8sbinding.RefusalCredentialNotOptedIn
	if waits {
		reason = v1.ReasonCredentialNotFound
	}
	var cr *k8sbinding.CredentialRefusal
	if serr == nil || serr.Reason() != reason || serr.Transient() || serr.Waiting() != waits ||
		!strings.Contains(serr.Message(), "("+name+")") || !errors.As(err, &cr) || cr.Name != name {
		t.Fatalf("got %v (%+v), want %s (%s)", err, serr, reason, name)
	}
	for _, d := range secretData {
		if strings.Contains(serr.Message(), d) || strings.Contains(err.Error(), d) {
			t.Fatalf("the refusal carries Secret data: %s", serr.Message())
		}
	}
}

// TestVerifyPackSecretsOptIn is the pull-secret and public-key gap of issue 10 (finding 3 applied
// to packs): a profile's pullSecretRef used to send any Secret of its namespace (a
// ServiceAccount token included) to a registry the tenant chose, and its publicKey Secret was
// read with no opt-in. Now both follow the credential rule: label
// connectors.b10x.io/credential=true, no ServiceAccount token, and a pull secret's
// allowed-hosts annotation names the registry host. A counting registry that requires the
// credentials proves that nothing reaches it with a refused Secret.
func TestVerifyPackSecretsOptIn(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true, Username: "robot", Password: "hunter2-registry"})
	t.Cleanup(reg.Close)
	dockerConfig := func(user, pass string) map[string][]byte {
		return map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"username":%q,"password":%q}}}`, reg.Host, user, pass)}
	}
	pusher, err := ociregistry.CredentialsFromDockerConfig(dockerConfig("robot", "hunter2-registry")[corev1.DockerConfigJsonKey])
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := strings.Cut(reg.Host, ":")
	w := &trustWorld{reg: reg, c: &ociregistry.Client{PlainHTTP: true, Credentials: pusher}, platform: newTestKey(t), team: newTestKey(t)}
	w.secrets = []client.Object{
		secretFixture("pull", corev1.SecretTypeDockerConfigJson, true, host, dockerConfig("robot", "hunter2-registry")),
		secretFixture("pull-other-host", corev1.SecretTypeDockerConfigJson, true, "registry.example.com", dockerConfig("robot", "hunter2-registry")),
		secretFixture("pull-no-hosts", corev1.SecretTypeDockerConfigJson, true, "", dockerConfig("robot", "hunter2-registry")),
		secretFixture("pull-unlabelled", corev1.SecretTypeDockerConfigJson, false, host, dockerConfig("robot", "hunter2-registry")),
		secretFixture("sa-token", corev1.SecretTypeServiceAccountToken, true, host, map[string][]byte{corev1.DockerConfigJsonKey: []byte("eyJhbGciOi.sa-token")}),
		secretFixture("key-unlabelled", corev1.SecretTypeOpaque, false, "", map[string][]byte{"cosign.pub": []byte(w.team.pem)}),
		secretFixture("key-sa-token", corev1.SecretTypeServiceAccountToken, true, "", map[string][]byte{"cosign.pub": []byte(w.team.pem)}),
	}
	platformPack := w.pack(t, w.platform, platformRepo, mainRef)
	verifier := func() *PackVerifier {
		v := w.verifier(t, true)
		anon := &ociregistry.Client{PlainHTTP: true}
		v.Registry, v.Verifier = *anon, ociregistry.NewVerifier(anon, nil)
		v.NewVerifier = func(c *ociregistry.Client) *ociregistry.Verifier {
			return ociregistry.NewVerifier(c, nil, ociregistry.WithCacheSize(0))
		}
		return v
	}
	pull := func(name string) activation.VerifyRequest {
		return activation.VerifyRequest{Namespace: "team-a", Ref: platformPack, PullSecret: &v1.LocalObjectReference{Name: name}}
	}

	t.Run("an opted-in pull secret naming the registry host is spent", func(t *testing.T) {
		vs, err := verifier().VerifyPack(ctx, pull("pull"))
		if err != nil || vs.Provenance.TrustSource != TrustSourcePlatform {
			t.Fatalf("%+v %v", vs, err)
		}
	})
	t.Run("twin: without the pull secret the registry refuses the pull", func(t *testing.T) {
		_, err := verifier().VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: platformPack})
		if serr := staged(err); serr == nil || serr.Reason() != v1.ReasonRegistryUnavailable {
			t.Fatalf("got %v, want %s", err, v1.ReasonRegistryUnavailable)
		}
	})
	for _, tc := range []struct{ secret, refusal string }{
		{"pull-other-host", k8sbinding.RefusalCredentialHostNotAllowed},
		{"pull-no-hosts", k8sbinding.RefusalCredentialHostNotAllowed},
		{"pull-unlabelled", k8sbinding.RefusalCredentialNotOptedIn},
		{"absent", k8sbinding.RefusalCredentialNotOptedIn},
		{"sa-token", k8sbinding.RefusalCredentialServiceAccountToken},
	} {
		t.Run("refused pull secret "+tc.secret+": nothing is sent to the registry", func(t *testing.T) {
			before := reg.Requests()
			_, err := verifier().VerifyPack(ctx, pull(tc.secret))
			wantSecretRefused(t, err, tc.refusal, "hunter2-registry", "eyJhbGciOi", "robot")
			if n := reg.Requests() - before; n != 0 {
				t.Fatalf("%d requests reached the registry with a refused pull secret", n)
			}
		})
	}
	own := func(name string) *v1.VerifyPolicy {
		return &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: name, Key: "cosign.pub"}}
	}
	t.Run("an opted-in public-key Secret is read (the profile's own key adds a requirement)", func(t *testing.T) {
		req := pull("pull")
		req.Policy = own("team-key")
		_, err := verifier().VerifyPack(ctx, req)
		wantStage(t, err, v1.ReasonVerificationFailed, RefusalProfilePolicy+"/untrusted_signature")
	})
	for _, tc := range []struct{ secret, refusal string }{
		{"key-unlabelled", k8sbinding.RefusalCredentialNotOptedIn},
		{"key-sa-token", k8sbinding.RefusalCredentialServiceAccountToken},
	} {
		t.Run("refused public-key Secret "+tc.secret, func(t *testing.T) {
			before := reg.Requests()
			req := pull("pull")
			req.Policy = own(tc.secret)
			_, err := verifier().VerifyPack(ctx, req)
			wantSecretRefused(t, err, tc.refusal, "BEGIN PUBLIC KEY")
			if n := reg.Requests() - before; n != 0 {
				t.Fatalf("%d requests reached the registry", n)
			}
		})
	}
}
