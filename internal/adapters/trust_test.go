package adapters

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/activation"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

const (
	platformRepo = "git+https://github.com/platform/profiles"
	teamRepo     = "git+https://github.com/team-a/profiles"
	mainRef      = "refs/heads/main"
	revision     = "0123456789abcdef0123456789abcdef01234567"
)

// testKey is a signing key with its PEM public key.
type testKey struct {
	signer *ociregistry.Signer
	pub    crypto.PublicKey
	pem    string
}

func newTestKey(t *testing.T) testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return testKey{&ociregistry.Signer{Keypair: kp}, priv.Public(), string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

func prov(repo, ref string) v1.ProvenancePolicy {
	return v1.ProvenancePolicy{SourceRepository: repo, SourceRef: ref}
}

func trustPolicy(name string, selector map[string]string, signers []v1.TrustedSigner, rules ...v1.ProvenancePolicy) v1.McpTrustPolicy {
	return v1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: v1.McpTrustPolicySpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: selector}, Signers: signers, Provenance: rules}}
}

func TestApplicableSources(t *testing.T) {
	k := newTestKey(t)
	platform := &TrustSource{Name: TrustSourcePlatform, Signers: []TrustSigner{{Name: "default-key", PublicKey: k.pub}}}
	keySigner := []v1.TrustedSigner{{Name: "team-key", PublicKeyPEM: k.pem}}
	policies := []v1.McpTrustPolicy{
		trustPolicy("z-team-a", map[string]string{"team": "a"}, keySigner, prov(teamRepo, mainRef)),
		trustPolicy("b-team-b", map[string]string{"team": "b"}, keySigner, prov(teamRepo, mainRef)),
		trustPolicy("a-everyone", nil, keySigner, prov(platformRepo, mainRef)),
		trustPolicy("bad-regexp", nil, []v1.TrustedSigner{{Name: "ci", Keyless: &v1.KeylessIdentity{Issuer: "https://i", SubjectRegExp: "^https://github.com/team-a/"}}}, prov(teamRepo, mainRef)),
		// Textually ^...$, but the branch "^https://github.com/team-a/" is not anchored at its end.
		trustPolicy("bad-regexp-branch", nil, []v1.TrustedSigner{{Name: "ci", Keyless: &v1.KeylessIdentity{Issuer: "https://i", SubjectRegExp: `^https://github\.com/team-a/|x$`}}}, prov(teamRepo, mainRef)),
		trustPolicy("bad-key", nil, []v1.TrustedSigner{{Name: "k", PublicKeyPEM: "not a key"}}, prov(teamRepo, mainRef)),
		{ObjectMeta: metav1.ObjectMeta{Name: "bad-selector"}, Spec: v1.McpTrustPolicySpec{NamespaceSelector: metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Nope"}}}}},
	}
	names := func(srcs []TrustSource) string {
		var out []string
		for _, s := range srcs {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		name     string
		platform *TrustSource
		labels   map[string]string
		want     string
	}{
		{"team a with platform", platform, map[string]string{"team": "a"}, "platform,McpTrustPolicy/a-everyone,McpTrustPolicy/z-team-a"},
		{"team b without platform", nil, map[string]string{"team": "b"}, "McpTrustPolicy/a-everyone,McpTrustPolicy/b-team-b"},
		{"unlabelled namespace", platform, nil, "platform,McpTrustPolicy/a-everyone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, invalid := ApplicableSources(tc.platform, policies, tc.labels)
			if names(got) != tc.want {
				t.Fatalf("sources %s, want %s", names(got), tc.want)
			}
			if strings.Join(invalid, ",") != "bad-key,bad-regexp,bad-regexp-branch,bad-selector" {
				t.Fatalf("invalid %v", invalid)
			}
		})
	}
}

func TestCandidates(t *testing.T) {
	p, team := newTestKey(t), newTestKey(t)
	sources := []TrustSource{
		{Name: TrustSourcePlatform, Signers: []TrustSigner{{Name: "default-key", PublicKey: p.pub}}, Provenance: []v1.ProvenancePolicy{prov(platformRepo, mainRef)}},
		{Name: "McpTrustPolicy/team-a", Signers: []TrustSigner{{Name: "team-key", PublicKey: team.pub}, {Name: "team-ci", Keyless: &v1.KeylessIdentity{Issuer: "https://i", Subject: "s"}}},
			Provenance: []v1.ProvenancePolicy{prov(teamRepo, mainRef), prov(teamRepo, "refs/heads/release")}},
		{Name: "McpTrustPolicy/no-rules", Signers: []TrustSigner{{Name: "lonely", PublicKey: team.pub}}},
	}
	pols, cands := Candidates(sources, false)
	if len(pols) != 5 || len(cands) != 5 {
		t.Fatalf("%d policies, want 1 + 2x2 (a source without rules grants nothing)", len(pols))
	}
	for i, c := range cands {
		repo := pols[i].Provenance.SourceRepository
		if (c.Source == TrustSourcePlatform) != (repo == platformRepo) {
			t.Fatalf("candidate %d mixes sources: %+v with %s", i, c, repo)
		}
		if err := pols[i].Validate(); err != nil {
			t.Fatalf("candidate %d: %v", i, err)
		}
	}
	pols, cands = Candidates(sources, true)
	if len(pols) != 6 || cands[5] != (Candidate{"McpTrustPolicy/no-rules", "lonely"}) || !pols[5].SkipProvenanceUnsafe {
		t.Fatalf("the unsafe waiver did not accept a rule-less source's signer alone: %+v", cands)
	}
	if pols, _ := Candidates(nil, true); len(pols) != 0 {
		t.Fatal("no source yields a candidate")
	}
}

func TestProfilePolicy(t *testing.T) {
	p, own := newTestKey(t), newTestKey(t)
	pr := prov(platformRepo, mainRef)
	satisfied := ociregistry.Policy{PublicKey: p.pub, Provenance: &pr}
	release := prov(platformRepo, "refs/heads/release")
	keyless := &v1.KeylessIdentity{Issuer: "https://i", Subject: "s"}
	cases := []struct {
		name    string
		own     *v1.VerifyPolicy
		want    func(*ociregistry.Policy) bool
		wantNil bool
	}{
		{"no policy", nil, nil, true},
		{"empty policy", &v1.VerifyPolicy{}, nil, true},
		{"provenance only: the satisfied signer with the profile's rule", &v1.VerifyPolicy{Provenance: &release},
			func(x *ociregistry.Policy) bool {
				return x.PublicKey == p.pub && x.Provenance == &release && !x.SkipProvenanceUnsafe
			}, false},
		{"own key only: that key, signature alone", &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: "k", Key: "cosign.pub"}},
			func(x *ociregistry.Policy) bool {
				return x.PublicKey == own.pub && x.Provenance == nil && x.SkipProvenanceUnsafe
			}, false},
		{"own keyless and rule", &v1.VerifyPolicy{Keyless: keyless, Provenance: &release},
			func(x *ociregistry.Policy) bool {
				return x.Keyless == keyless && x.PublicKey == nil && x.Provenance == &release
			}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ProfilePolicy(tc.own, own.pub, satisfied)
			if tc.wantNil {
				if got != nil {
					t.Fatalf("got %+v, want nothing added", got)
				}
				return
			}
			if got == nil || !tc.want(got) || got.Validate() != nil {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

// trustWorld is a real in-process registry with one reviewed pack per call to pack, signed by a
// real key, and a fake apiserver reader holding namespaces, key Secrets and trust policies.
type trustWorld struct {
	reg      *ocitest.Registry
	c        *ociregistry.Client
	platform testKey
	team     testKey
	packs    int
	secrets  []client.Object // more Secrets for the fake apiserver
}

func newTrustWorld(t *testing.T) *trustWorld {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	return &trustWorld{reg: reg, c: &ociregistry.Client{PlainHTTP: true}, platform: newTestKey(t), team: newTestKey(t)}
}

func testDocument(t *testing.T) *v1.ProfileDocument {
	t.Helper()
	s, err := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "Acme", Version: "1"}, []json.RawMessage{
		json.RawMessage(`{"name":"list_issues","inputSchema":{"type":"object"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(s)
	for i := range doc.Operations {
		doc.Operations[i].Effect = v1.EffectRead
	}
	return doc
}

// pack pushes a pack signed by k with provenance from repo@ref.
func (w *trustWorld) pack(t *testing.T, k testKey, repo, ref string) string {
	t.Helper()
	r, err := ociregistry.ParseRepository(w.reg.Host + "/team/acme")
	if err != nil {
		t.Fatal(err)
	}
	doc := testDocument(t)
	w.packs++
	doc.Service.Ref = fmt.Sprintf("svc-%d", w.packs) // a distinct pack per call
	pr, err := w.c.Push(context.Background(), r, []*v1.ProfileDocument{doc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.signer.Sign(context.Background(), w.c, pr, &ociregistry.Provenance{SourceRepository: repo, SourceRef: ref, SourceRevision: revision}); err != nil {
		t.Fatal(err)
	}
	return pr.String()
}

func (w *trustWorld) verifier(t *testing.T, withPlatform bool, policies ...v1.McpTrustPolicy) *PackVerifier {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "team-key", Labels: map[string]string{v1.CredentialLabel: "true"}},
			Data: map[string][]byte{"cosign.pub": []byte(w.team.pem)}},
	}
	objs = append(objs, w.secrets...)
	for i := range policies {
		p := policies[i]
		p.ResourceVersion = ""
		objs = append(objs, &p)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	v := &PackVerifier{Verifier: ociregistry.NewVerifier(w.c, nil), Registry: *w.c, Secrets: reader, Trust: reader}
	if withPlatform {
		v.Platform = &TrustSource{Name: TrustSourcePlatform, Signers: []TrustSigner{{Name: "default-key", PublicKey: w.platform.pub}},
			Provenance: []v1.ProvenancePolicy{prov(platformRepo, mainRef)}}
	}
	return v
}

// staged classifies a VerifyPack error as the profile reconciler does (nil for nil).
func staged(err error) *activation.StageError {
	return activation.ClassifyVerifyError(activation.VerifyRequest{}, err)
}

// wantStage asserts a refusal's reason and that its message names want.
func wantStage(t *testing.T, err error, reason, want string) {
	t.Helper()
	serr := staged(err)
	if serr == nil || serr.Reason() != reason || serr.Transient() || !strings.Contains(serr.Message(), want) {
		t.Fatalf("got %v (%+v), want %s naming %q", err, serr, reason, want)
	}
}

// TestVerifyPackTrustFloor is finding 1 of issue 10 and its fix: a tenant's own key and own
// repository in the profile's verify block no longer activate anything; only a cluster-scoped
// McpTrustPolicy grants a team's signer, for the namespaces it selects, with its own provenance
// rules; and a profile's own policy only adds requirements.
func TestVerifyPackTrustFloor(t *testing.T) {
	ctx := context.Background()
	w := newTrustWorld(t)
	tenantOwn := &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: "team-key", Key: "cosign.pub"}, Provenance: &v1.ProvenancePolicy{SourceRepository: teamRepo, SourceRef: mainRef}}
	teamPack := w.pack(t, w.team, teamRepo, mainRef)
	grant := trustPolicy("team-a", map[string]string{"team": "a"}, []v1.TrustedSigner{{Name: "team-key", PublicKeyPEM: w.team.pem}}, prov(teamRepo, mainRef))

	t.Run("finding 1: the tenant's own key and repository are not trust", func(t *testing.T) {
		_, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: teamPack, Policy: tenantOwn})
		wantStage(t, err, v1.ReasonVerificationFailed, "untrusted_signature")
	})
	t.Run("no trust source at all is refused by name, never the profile's own policy", func(t *testing.T) {
		_, err := w.verifier(t, false).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: teamPack, Policy: tenantOwn})
		wantStage(t, err, v1.ReasonUntrustedSigner, RefusalNoTrustSource)
	})
	t.Run("a cluster admin's McpTrustPolicy grants the team's signer in its namespace", func(t *testing.T) {
		vs, err := w.verifier(t, true, grant).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: teamPack, Policy: tenantOwn})
		if err != nil {
			t.Fatal(err)
		}
		if vs.Provenance.TrustSource != "McpTrustPolicy/team-a" || vs.Provenance.Signer != "team-key" || vs.Provenance.SourceRevision != revision {
			t.Fatalf("%+v", vs.Provenance)
		}
	})
	t.Run("the grant does not reach another namespace", func(t *testing.T) {
		_, err := w.verifier(t, true, grant).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-b", Ref: teamPack})
		wantStage(t, err, v1.ReasonVerificationFailed, "untrusted_signature")
	})
	t.Run("a team's signer is not good for the platform's repository", func(t *testing.T) {
		ref := w.pack(t, w.team, platformRepo, mainRef)
		_, err := w.verifier(t, true, grant).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: ref})
		wantStage(t, err, v1.ReasonVerificationFailed, "wrong_source_repository")
	})
	t.Run("the platform's signer is not good for the team's repository", func(t *testing.T) {
		ref := w.pack(t, w.platform, teamRepo, mainRef)
		_, err := w.verifier(t, true, grant).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: ref})
		wantStage(t, err, v1.ReasonVerificationFailed, "wrong_source_repository")
	})
	platformPack := w.pack(t, w.platform, platformRepo, mainRef)
	t.Run("the platform's own pack verifies with no profile policy", func(t *testing.T) {
		vs, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-b", Ref: platformPack})
		if err != nil || vs.Provenance.TrustSource != TrustSourcePlatform || vs.Provenance.Signer != "default-key" {
			t.Fatalf("%+v %v", vs, err)
		}
	})
	t.Run("the profile's own provenance adds a requirement", func(t *testing.T) {
		own := &v1.VerifyPolicy{Provenance: &v1.ProvenancePolicy{SourceRepository: platformRepo, SourceRef: "refs/heads/release"}}
		_, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-b", Ref: platformPack, Policy: own})
		wantStage(t, err, v1.ReasonVerificationFailed, RefusalProfilePolicy+"/wrong_source_ref")
	})
	t.Run("the profile's own key adds a requirement", func(t *testing.T) {
		own := &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: "team-key", Key: "cosign.pub"}}
		_, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: platformPack, Policy: own})
		wantStage(t, err, v1.ReasonVerificationFailed, RefusalProfilePolicy+"/untrusted_signature")
	})
	t.Run("an unanchored subject in the profile's policy is refused by name", func(t *testing.T) {
		own := &v1.VerifyPolicy{Keyless: &v1.KeylessIdentity{Issuer: "https://i", SubjectRegExp: "^https://github.com/team-a/"}}
		_, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: platformPack, Policy: own})
		wantStage(t, err, v1.ReasonVerificationFailed, "unanchored_subject_regexp")
	})
	t.Run("a subject anchored in text only (^a|b$) in the profile's policy is refused by name", func(t *testing.T) {
		own := &v1.VerifyPolicy{Keyless: &v1.KeylessIdentity{Issuer: "https://i", SubjectRegExp: `^https://github\.com/team-a/|x$`}}
		_, err := w.verifier(t, true).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: platformPack, Policy: own})
		wantStage(t, err, v1.ReasonVerificationFailed, "unanchored_subject_regexp")
	})
	t.Run("a grant without provenance rules grants nothing", func(t *testing.T) {
		noRules := trustPolicy("team-a", map[string]string{"team": "a"}, []v1.TrustedSigner{{Name: "team-key", PublicKeyPEM: w.team.pem}})
		_, err := w.verifier(t, false, noRules).VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: teamPack})
		wantStage(t, err, v1.ReasonUntrustedSigner, RefusalNoTrustSource)
		v := w.verifier(t, false, noRules)
		v.SkipProvenanceUnsafe, v.Waived = true, []string{WaivedProvenance}
		vs, err := v.VerifyPack(ctx, activation.VerifyRequest{Namespace: "team-a", Ref: teamPack})
		if err != nil || vs.Provenance.SourceRef != "" || len(vs.Provenance.WaivedChecks) != 1 {
			t.Fatalf("the unsafe waiver: %+v %v", vs, err)
		}
	})
}

// TestTrustFingerprint: granting, changing or revoking a policy that selects the namespace changes
// the fingerprint the resolver memo is keyed on; a policy for another namespace does not.
func TestTrustFingerprint(t *testing.T) {
	ctx := context.Background()
	w := newTrustWorld(t)
	signers := []v1.TrustedSigner{{Name: "team-key", PublicKeyPEM: w.team.pem}}
	none, err := w.verifier(t, true).TrustFingerprint(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := w.verifier(t, true, trustPolicy("team-b", map[string]string{"team": "b"}, signers, prov(teamRepo, mainRef))).TrustFingerprint(ctx, "team-a")
	granted, _ := w.verifier(t, true, trustPolicy("team-a", map[string]string{"team": "a"}, signers, prov(teamRepo, mainRef))).TrustFingerprint(ctx, "team-a")
	if other != none || granted == none {
		t.Fatalf("fingerprints: none %s other %s granted %s", none, other, granted)
	}
	v := w.verifier(t, true, trustPolicy("team-a", map[string]string{"team": "a"}, signers, prov(teamRepo, mainRef)))
	p := &v1.McpTrustPolicy{}
	if err := v.Trust.(client.Client).Get(ctx, client.ObjectKey{Name: "team-a"}, p); err != nil {
		t.Fatal(err)
	}
	// A status write (the manager's own Ready condition) changes the resourceVersion, not the
	// generation: the fingerprint, and so the verification memo, stays.
	p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the grant is valid", LastTransitionTime: metav1.Now()}}
	if err := v.Trust.(client.Client).Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if status, _ := v.TrustFingerprint(ctx, "team-a"); status != granted {
		t.Fatal("a status-only write changed the fingerprint")
	}
	// A spec change bumps the generation (the fake client does not, the apiserver does).
	p.Spec.Provenance[0].SourceRef = "refs/heads/release"
	p.Generation++
	if err := v.Trust.(client.Client).Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	changed, _ := v.TrustFingerprint(ctx, "team-a")
	if changed == granted {
		t.Fatal("a changed policy kept its fingerprint")
	}
}
