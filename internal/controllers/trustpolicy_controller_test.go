package controllers_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/writecount"
)

// testPEM is a valid P-256 public key.
var testPEM = func() string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}()

// badKeyPEM parses as PEM but holds no key; its body must never reach a condition.
const badKeyPEM = "-----BEGIN PUBLIC KEY-----\nU0VDUkVULUxJS0UtQllURVM=\n-----END PUBLIC KEY-----\n"

func trustPolicy(mutate func(*v1.McpTrustPolicy)) *v1.McpTrustPolicy {
	p := &v1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Generation: 3},
		Spec: v1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			Signers: []v1.TrustedSigner{
				{Name: "team-key", PublicKeyPEM: testPEM},
				{Name: "team-ci", Keyless: &v1.KeylessIdentity{Issuer: "https://token.actions.example.com",
					SubjectRegExp: `^https://github\.com/team-a/profiles/\.github/workflows/pack\.yml@refs/heads/main$`}},
			},
			Provenance: []v1.ProvenancePolicy{{SourceRepository: "git+https://github.com/team-a/profiles", SourceRef: "refs/heads/main"}},
			Egress:     v1.TrustEgressCeiling{AllowedCIDRs: []string{"10.20.0.0/16", "fd00:20::/48"}},
		}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// TestValidateTrustPolicy: each invalid field is named with its refusal, never its value; the
// valid policy passes.
func TestValidateTrustPolicy(t *testing.T) {
	cases := []struct {
		name, field, refusal string
		mutate               func(*v1.McpTrustPolicy)
	}{
		{"valid", "", "", nil},
		{"bad selector", "spec.namespaceSelector", adapters.RefusalInvalidNamespaceSelector, func(p *v1.McpTrustPolicy) {
			p.Spec.NamespaceSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}
		}},
		{"bad key", "spec.signers[0]", "invalid_key", func(p *v1.McpTrustPolicy) { p.Spec.Signers[0].PublicKeyPEM = badKeyPEM }},
		{"unanchored regexp", "spec.signers[1]", "unanchored_subject_regexp", func(p *v1.McpTrustPolicy) {
			p.Spec.Signers[1].Keyless.SubjectRegExp = `^https://github\.com/team-a/`
		}},
		{"bad CIDR", "spec.egress.allowedCIDRs[1]", adapters.RefusalInvalidCIDR, func(p *v1.McpTrustPolicy) {
			p.Spec.Egress.AllowedCIDRs[1] = "fd00:20::/129"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := adapters.ValidateTrustPolicy(trustPolicy(tc.mutate))
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ig *adapters.InvalidGrantError
			if !errors.As(err, &ig) || !errors.Is(err, adapters.ErrInvalidGrant) || ig.Field != tc.field || ig.Refusal != tc.refusal {
				t.Fatalf("got %v, want %s (%s)", err, tc.field, tc.refusal)
			}
			if msg := err.Error(); strings.Contains(msg, "U0VDUkVU") || strings.Contains(msg, "github") || strings.Contains(msg, "fd00") {
				t.Fatalf("the refusal carries a value: %s", msg)
			}
		})
	}
}

// TestTrustPolicyReconciler: a valid policy becomes Ready True (Valid) with observedGeneration;
// an invalid one Ready False and Stalled True (InvalidGrant) naming the field; a second pass
// over an unchanged policy makes no write; fixing the policy clears Stalled.
func TestTrustPolicyReconciler(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var writes int
	invalid := trustPolicy(func(p *v1.McpTrustPolicy) { p.Name = "invalid"; p.Spec.Signers[0].PublicKeyPEM = badKeyPEM })
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.McpTrustPolicy{}).
		WithObjects(trustPolicy(nil), invalid).WithInterceptorFuncs(writecount.Funcs(func() { writes++ })).Build()
	r := &controllers.TrustPolicyReconciler{Client: c, Validate: adapters.ValidateTrustPolicy}
	pass := func(name string) *v1.McpTrustPolicy {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
		p := &v1.McpTrustPolicy{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := pass("team-a")
	ready := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != v1.ReasonValidGrant ||
		p.Status.ObservedGeneration != p.Generation || meta.FindStatusCondition(p.Status.Conditions, v1.ConditionStalled) != nil || writes != 1 {
		t.Fatalf("valid: %+v, %d writes", p.Status, writes)
	}
	pass("team-a")
	if writes != 1 {
		t.Fatalf("a no-op pass wrote %d times", writes-1)
	}

	p = pass("invalid")
	ready = meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady)
	stalled := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionStalled)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1.ReasonInvalidGrant ||
		!strings.Contains(ready.Message, "spec.signers[0] is invalid (invalid_key)") || strings.Contains(ready.Message, "U0VDUkVU") ||
		stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1.ReasonInvalidGrant {
		t.Fatalf("invalid: %+v", p.Status)
	}
	before := writes
	pass("invalid")
	if writes != before {
		t.Fatal("a no-op pass over an invalid policy wrote")
	}

	// The administrator fixes the key: Ready True, Stalled gone.
	p.Spec.Signers[0].PublicKeyPEM = testPEM
	p.Generation++
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = pass("invalid")
	if ready = meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady); ready.Status != metav1.ConditionTrue ||
		meta.FindStatusCondition(p.Status.Conditions, v1.ConditionStalled) != nil || p.Status.ObservedGeneration != p.Generation {
		t.Fatalf("fixed: %+v", p.Status)
	}
}
