package adapters

import (
	"errors"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// invalidGrantMessage is the only shape an McpTrustPolicy refusal may take: a field path and a
// refusal name, nothing an administrator wrote (a key, an expression, a range, a label).
var invalidGrantMessage = regexp.MustCompile(`^spec\.(namespaceSelector|signers\[\d+\]|egress\.allowedCIDRs\[\d+\]) is invalid \([a-z_]+\)$`)

// FuzzValidateTrustPolicyMessage: whatever the selector operator, key, subject expression and
// range, ValidateTrustPolicy either accepts the policy or refuses it with a message of the fixed
// shape above, matched by ErrInvalidGrant.
func FuzzValidateTrustPolicyMessage(f *testing.F) {
	f.Add("In", "-----BEGIN PUBLIC KEY-----\nU0VDUkVU\n-----END PUBLIC KEY-----\n", `^https://x$`, "10.0.0.0/8")
	f.Add("Near", "", `^https://github\.com/acme/`, "10.0.0.0/33")
	f.Add("Exists", "not a key", `^a\$`, "fd00::/8")
	f.Add("In", "", "(", "::ffff:10.0.0.0/104")
	f.Fuzz(func(t *testing.T, op, pem, subjectRE, cidr string) {
		p := &v1.McpTrustPolicy{Spec: v1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOperator(op), Values: []string{"a"}}}},
			Signers: []v1.TrustedSigner{
				{Name: "k", PublicKeyPEM: pem},
				{Name: "ci", Keyless: &v1.KeylessIdentity{Issuer: "https://i", SubjectRegExp: subjectRE}},
			},
			Egress: v1.TrustEgressCeiling{AllowedCIDRs: []string{cidr}},
		}}
		err := ValidateTrustPolicy(p)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrInvalidGrant) || !invalidGrantMessage.MatchString(err.Error()) {
			t.Fatalf("refusal %q (%v) is not of the fixed shape", err.Error(), err)
		}
	})
}
