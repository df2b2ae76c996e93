package envtest

// User story of the multi-tenant trust model (issue 10, finding 1): a tenant who may edit
// McpServiceProfiles and ServiceDeployments in its own namespace signs a pack with its own key,
// from its own repository, and names both in the profile. That is not trust: the profile is
// refused by name and nothing is sent to its endpoint. Trust for the team's signer is granted
// only by a cluster admin's McpTrustPolicy, for the namespaces it selects.

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

const teamRepo = "git+https://github.com/team-a/mcp-profiles"

// tenantClient is a client acting as user in namespace ns with edit rights on the two
// namespaced kinds there, and Secret create (never read): a Role and RoleBinding made by the
// cluster admin, the user impersonated.
func tenantClient(t *testing.T, ns, user string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"mcpserviceprofiles", "servicedeployments"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	mustCreate(t, role)
	mustCreate(t, rb)
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(as, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStoryTenantTrust(t *testing.T) {
	ctx := context.Background()
	teamNS := newNamespace(t, "story-tenant-a")
	otherNS := newNamespace(t, "story-tenant-b")
	// The cluster admin labels the team's namespace; the selector value is unique to this test.
	teamLabel := map[string]string{"connectors.b10x.io/team": teamNS}
	nsObj := &corev1.Namespace{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Name: teamNS}, nsObj); err != nil {
		t.Fatal(err)
	}
	mutate(t, nsObj, func(n *corev1.Namespace) { n.Labels = teamLabel })

	// The platform trusts its own key for its own repository; the manager watches both namespaces.
	w, _ := newPackWorldWithServer(t, teamNS)
	o := devOptions()
	w.trustPlatform(&o)
	startOperatorIn(t, cfg, []string{teamNS, otherNS}, o)

	// The team signs a reviewed pack with its own key, with provenance from its own repository.
	team := newTeamSigner(t)
	teamPEM := team.pem
	// The tenant's endpoint is a counting server; its reviewed profile is the pack's document.
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	w.doc = reviewedProfile(t, live.URL)
	reviewHits := live.hits.Load()
	ref := w.push(t, "team-a/demo")
	if _, err := team.signer.Sign(ctx, w.client, ref, &ociregistry.Provenance{
		SourceRepository: teamRepo, SourceRef: packRef, SourceRevision: packRevision}); err != nil {
		t.Fatal(err)
	}

	// The tenant names its own key and repository in the profile and binds a deployment.
	tenant := tenantClient(t, teamNS, "tenant-a")
	if err := tenant.Create(ctx, newSecret(teamNS, "team-key", "cosign.pub", teamPEM)); err != nil {
		t.Fatalf("tenant creates its key Secret: %v", err)
	}
	if err := tenant.Get(ctx, types.NamespacedName{Namespace: teamNS, Name: "team-key"}, &corev1Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant can read Secrets: %v", err)
	}
	own := &apiv1.VerifyPolicy{PublicKey: &apiv1.SecretKeyReference{Name: "team-key", Key: "cosign.pub"},
		Provenance: &apiv1.ProvenancePolicy{SourceRepository: teamRepo, SourceRef: packRef}}
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "demo"},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String(), Verify: own}}}}
	if err := tenant.Create(ctx, prof); err != nil {
		t.Fatalf("tenant creates its profile: %v", err)
	}
	makeGrant(t, teamNS, "all")
	sd := newDeployment(teamNS, "demo", "demo", "demo", live.URL, w.doc, nil, "all")
	if err := tenant.Create(ctx, sd); err != nil {
		t.Fatalf("tenant creates its deployment: %v", err)
	}

	// Refused by name; nothing is sent to the endpoint.
	prof = waitObj(t, prof, storyTimeout, "refused", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonVerificationFailed)
	})
	if c := condOf(prof, apiv1.ConditionSourceVerified); !strings.Contains(c.Message, "untrusted_signature") || prof.Status.Verified != nil {
		t.Fatalf("SourceVerified %q, verified %+v", c.Message, prof.Status.Verified)
	}
	waitObj(t, sd, storyTimeout, "deployment not activated", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, "")
	})
	if n := live.hits.Load() - reviewHits; n != 0 {
		t.Fatalf("the refused tenant's endpoint received %d requests", n)
	}

	// The tenant cannot grant itself trust, nor select its namespace into another grant.
	grant := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: teamNS},
		Spec: apiv1.McpTrustPolicySpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: teamLabel},
			Signers:    []apiv1.TrustedSigner{{Name: "team-a-key", PublicKeyPEM: teamPEM}},
			Provenance: []apiv1.ProvenancePolicy{{SourceRepository: teamRepo, SourceRef: packRef}}}}
	if err := tenant.Create(ctx, grant.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant created an McpTrustPolicy: %v", err)
	}
	if err := tenant.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"connectors.b10x.io/team":"`+teamNS+`"}}}`))); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant relabelled a namespace: %v", err)
	}

	// The cluster admin grants the team's signer and repository to the team's namespace.
	mustCreate(t, grant)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), grant) })
	prof = waitObj(t, prof, storyTimeout, "Ready under the grant", isReady[*apiv1.McpServiceProfile])
	if v := prof.Status.Verified; v == nil || v.TrustSource != "McpTrustPolicy/"+teamNS || v.Signer != "team-a-key" ||
		v.SourceRepository != teamRepo || v.SourceRevision != packRevision || len(v.WaivedChecks) != 0 {
		t.Fatalf("verified %+v", prof.Status.Verified)
	}
	waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	if live.hits.Load() == reviewHits {
		t.Fatal("the activated deployment never froze its endpoint")
	}

	// Under the grant, the tenant's pull and public-key Secrets must still opt in: an unlabelled
	// key Secret and a labelled pull secret for another registry host are refused by name, and
	// the registry receives nothing with them (finding 3 applied to packs).
	unlabelled := newSecret(teamNS, "team-key-unlabelled", "cosign.pub", teamPEM)
	unlabelled.Labels = nil
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "pull-elsewhere",
		Labels:      map[string]string{apiv1.CredentialLabel: "true"},
		Annotations: map[string]string{apiv1.CredentialAllowedHostsAnnotation: "registry.example.com"}},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + w.reg.Host + `":{"username":"robot","password":"pull-password"}}}`)}}
	for _, s := range []*corev1.Secret{unlabelled, pull} {
		if err := tenant.Create(ctx, s); err != nil {
			t.Fatalf("tenant creates Secret %s: %v", s.Name, err)
		}
	}
	regHits := w.reg.Requests()
	for _, tc := range []struct {
		name, refusal string
		src           apiv1.OCISource
		// reason: an unlabelled Secret may still be labelled (waiting, CredentialNotFound); a
		// Secret for another host is refused (CredentialRefused).
		reason string
	}{
		{"unlabelled-key", k8sbinding.RefusalCredentialNotOptedIn, apiv1.OCISource{Ref: ref.String(),
			Verify: &apiv1.VerifyPolicy{PublicKey: &apiv1.SecretKeyReference{Name: unlabelled.Name, Key: "cosign.pub"}}}, apiv1.ReasonCredentialNotFound},
		{"pull-elsewhere", k8sbinding.RefusalCredentialHostNotAllowed, apiv1.OCISource{Ref: ref.String(),
			PullSecretRef: &apiv1.LocalObjectReference{Name: pull.Name}}, apiv1.ReasonCredentialRefused},
	} {
		p := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: tc.name},
			Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &tc.src}}}
		if err := tenant.Create(ctx, p); err != nil {
			t.Fatalf("tenant creates profile %s: %v", tc.name, err)
		}
		p = waitObj(t, p, storyTimeout, tc.name+" refused", func(p *apiv1.McpServiceProfile) bool {
			return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, tc.reason)
		})
		if c := condOf(p, apiv1.ConditionSourceVerified); !strings.Contains(c.Message, "("+tc.refusal+")") ||
			strings.Contains(c.Message, "pull-password") || strings.Contains(c.Message, "PUBLIC KEY") {
			t.Fatalf("%s: SourceVerified %q", tc.name, c.Message)
		}
	}
	if n := w.reg.Requests() - regHits; n != 0 {
		t.Fatalf("the registry received %d requests with refused Secrets", n)
	}

	// The same profile in a namespace the grant does not select is still refused.
	other := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "demo"},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String()}}}}
	mustCreate(t, other)
	other = waitObj(t, other, storyTimeout, "refused elsewhere", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonVerificationFailed)
	})
	if c := condOf(other, apiv1.ConditionSourceVerified); !strings.Contains(c.Message, "untrusted_signature") {
		t.Fatalf("other namespace: %q", c.Message)
	}
	// The refusal in the other namespace names nothing of the team's namespace: not the grant
	// (McpTrustPolicy/<teamNS>), its signer, nor the namespace itself.
	if js := mustJSON(t, other.Status); strings.Contains(js, teamNS) || strings.Contains(js, "team-a-key") {
		t.Fatalf("the other namespace's refusal names the team's grant: %s", js)
	}
	// Nor do the team's own refusals name the other namespace.
	for _, name := range []string{"unlabelled-key", "pull-elsewhere"} {
		p := &apiv1.McpServiceProfile{}
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: teamNS, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		if js := mustJSON(t, p.Status); strings.Contains(js, otherNS) {
			t.Fatalf("%s: the team's refusal names the other namespace: %s", name, js)
		}
	}

	// Revoking the grant is noticed: the profile is refused again, and its deployment with it.
	if err := k8sClient.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	waitObj(t, prof, storyTimeout, "refused after revocation", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonVerificationFailed)
	})
	waitObj(t, sd, storyTimeout, "deployment deactivated after revocation", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, "")
	})
}

// TestTrustPolicySampleAndAdmission: the shipped McpTrustPolicy sample is accepted by the
// apiserver (strict field validation) and grants what it says; its twin with an unanchored
// subject expression is rejected at admission by name, as is one in a profile's verify block.
func TestTrustPolicySampleAndAdmission(t *testing.T) {
	ctx := context.Background()
	u := loadSample(t, "connectors_v1_mcptrustpolicy.yaml")
	u.SetName("sample-" + strings.ToLower(t.Name()))
	if err := k8sClient.Create(ctx, u); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), u) })
	p := &apiv1.McpTrustPolicy{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(u), p); err != nil {
		t.Fatal(err)
	}
	src, err := adapters.TrustSourceFromPolicy(p)
	if err != nil || len(src.Signers) != 2 || src.Signers[0].Keyless == nil || src.Signers[1].PublicKey == nil || len(src.Provenance) != 1 {
		t.Fatalf("the sample grants %+v (%v)", src, err)
	}

	unanchored := p.DeepCopy()
	unanchored.ObjectMeta = metav1.ObjectMeta{Name: "unanchored-" + strings.ToLower(t.Name())}
	unanchored.Spec.Signers[0].Keyless.SubjectRegExp = `^https://github\.com/example/`
	err = k8sClient.Create(ctx, unanchored)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "unanchored_subject_regexp") {
		t.Fatalf("an unanchored subject expression was not rejected by name: %v", err)
	}
	ns := newNamespace(t, "story-anchor")
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{
			Ref:    "registry.example.com/p@" + validDigest,
			Verify: &apiv1.VerifyPolicy{Keyless: &apiv1.KeylessIdentity{Issuer: "https://issuer.example", SubjectRegExp: "https://github.com/example/.*$"}}}}}}
	if err := k8sClient.Create(ctx, prof); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "unanchored_subject_regexp") {
		t.Fatalf("a profile's unanchored subject expression was not rejected by name: %v", err)
	}
}

// TestStoryWaivedChecksShowInStatus: a platform that trusts its key but names no provenance rule
// activates nothing in production (UntrustedSigner, no_trust_source); the same pack under
// --skip-provenance-unsafe is Ready, and the profile says which check was waived.
func TestStoryWaivedChecksShowInStatus(t *testing.T) {
	ctx := context.Background()
	for _, unsafe := range []bool{false, true} {
		ns := newNamespace(t, "story-waived")
		w := newPackWorld(t, ns)
		o := devOptions()
		w.trustPlatform(&o)
		o.DefaultSourceRepository, o.DefaultSourceRef = "", ""
		o.SkipProvenanceUnsafe = unsafe
		startOperator(t, ns, o)
		ref := w.push(t, "team/waived")
		if _, err := w.signer.Sign(ctx, w.client, ref, nil); err != nil {
			t.Fatal(err)
		}
		prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waived"},
			Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String()}}}}
		mustCreate(t, prof)
		if !unsafe {
			prof = refusedWith(t, prof, apiv1.ReasonUntrustedSigner)
			if c := condOf(prof, apiv1.ConditionSourceVerified); c.Reason != apiv1.ReasonUntrustedSigner || !strings.Contains(c.Message, "no_trust_source") {
				t.Fatalf("production flags: SourceVerified %s %q", c.Reason, c.Message)
			}
			continue
		}
		prof = waitObj(t, prof, storyTimeout, "Ready with a waiver", isReady[*apiv1.McpServiceProfile])
		if v := prof.Status.Verified; v == nil || strings.Join(v.WaivedChecks, ",") != "provenance" || v.TrustSource != "platform" || v.SourceRef != "" {
			t.Fatalf("verified %+v", prof.Status.Verified)
		}
		if c := condOf(prof, apiv1.ConditionReady); !strings.Contains(c.Message, "checks waived by unsafe manager flags: provenance") {
			t.Fatalf("Ready message %q", c.Message)
		}
	}
}
