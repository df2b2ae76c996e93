package envtest

// User story of a cluster administrator writing McpTrustPolicies (issue 10): a valid grant says
// Ready, an invalid one says which field is wrong (never its value) instead of silently granting
// nothing, and fixing it makes it Ready.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

func TestStoryTrustPolicyStatus(t *testing.T) {
	ns := newNamespace(t, "story-trust-status")
	startOperator(t, ns, devOptions())
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	const secretish = "U0VDUkVULUxJS0UtQllURVM" //nolint:gosec // the body of a PEM block that is no key, not a credential
	policy := func(name string, mutate func(*apiv1.McpTrustPolicy)) *apiv1.McpTrustPolicy {
		p := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiv1.McpTrustPolicySpec{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"connectors.b10x.io/team": ns}},
				Signers:           []apiv1.TrustedSigner{{Name: "team-key", PublicKeyPEM: keyPEM}},
				Provenance:        []apiv1.ProvenancePolicy{{SourceRepository: teamRepo, SourceRef: packRef}},
				Egress:            apiv1.TrustEgressCeiling{AllowedCIDRs: []string{"10.42.0.0/16"}},
			}}
		if mutate != nil {
			mutate(p)
		}
		mustCreate(t, p)
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
		return p
	}

	valid := policy(ns+"-valid", nil)
	valid = waitObj(t, valid, storyTimeout, "valid policy Ready", isReady[*apiv1.McpTrustPolicy])
	if c := condOf(valid, apiv1.ConditionReady); c.Reason != apiv1.ReasonValidGrant || kstatusOf(t, valid) != status.CurrentStatus {
		t.Fatalf("valid: %+v, kstatus %s", c, kstatusOf(t, valid))
	}

	for _, tc := range []struct {
		name, field string
		mutate      func(*apiv1.McpTrustPolicy)
	}{
		{"bad-key", "spec.signers[0] is invalid (invalid_key)", func(p *apiv1.McpTrustPolicy) {
			p.Spec.Signers[0].PublicKeyPEM = "-----BEGIN PUBLIC KEY-----\n" + secretish + "=\n-----END PUBLIC KEY-----\n"
		}},
		{"unanchored", "spec.signers[0] is invalid (unanchored_subject_regexp)", func(p *apiv1.McpTrustPolicy) {
			p.Spec.Signers[0] = apiv1.TrustedSigner{Name: "team-ci", Keyless: &apiv1.KeylessIdentity{Issuer: ciIssuer, SubjectRegExp: `^https://github\.com/acme/profiles\$`}} // passes admission (ends with "$"), but the "$" is escaped
		}},
		{"bad-cidr", "spec.egress.allowedCIDRs[0] is invalid (invalid_cidr)", func(p *apiv1.McpTrustPolicy) {
			p.Spec.Egress.AllowedCIDRs = []string{"10.42.0.0/33"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(ns+"-"+tc.name, tc.mutate)
			p = waitObj(t, p, storyTimeout, "invalid policy refused", func(p *apiv1.McpTrustPolicy) bool {
				return hasCondition(p, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonInvalidGrant) && p.Status.ObservedGeneration == p.Generation
			})
			c := condOf(p, apiv1.ConditionReady)
			if !strings.Contains(c.Message, tc.field) || strings.Contains(c.Message, secretish) || strings.Contains(c.Message, "github") ||
				!hasCondition(p, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonInvalidGrant) || kstatusOf(t, p) != status.FailedStatus {
				t.Fatalf("Ready %+v, kstatus %s", c, kstatusOf(t, p))
			}
			if tc.name != "bad-cidr" {
				return
			}
			// The administrator fixes the range: Ready, Stalled gone, for the new generation.
			mutate(t, p, func(p *apiv1.McpTrustPolicy) { p.Spec.Egress.AllowedCIDRs = []string{"10.42.0.0/16"} })
			p = waitObj(t, p, storyTimeout, "fixed policy Ready", isReady[*apiv1.McpTrustPolicy])
			if hasCondition(p, apiv1.ConditionStalled, metav1.ConditionTrue, "") {
				t.Fatalf("Stalled after the fix: %+v", p.Status)
			}
		})
	}
}
