package adapters

import (
	"errors"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
)

// Refusal names of an invalid McpTrustPolicy field, beside the ocipack refusals of a signer
// (invalid_key, unanchored_subject_regexp, invalid_policy).
const (
	// RefusalInvalidNamespaceSelector: spec.namespaceSelector does not convert to a selector.
	RefusalInvalidNamespaceSelector = "invalid_namespace_selector"
	// RefusalInvalidCIDR: an entry of spec.egress.allowedCIDRs is not a CIDR prefix.
	RefusalInvalidCIDR = "invalid_cidr"
)

// ErrInvalidGrant matches every [*InvalidGrantError].
var ErrInvalidGrant = errors.New("adapters: invalid McpTrustPolicy grant")

// InvalidGrantError names the first invalid field of an McpTrustPolicy and the refusal. It
// never carries the field's value (a key, an expression, a range).
type InvalidGrantError struct {
	// Field is the field path, e.g. "spec.signers[1]" or "spec.egress.allowedCIDRs[0]".
	Field string
	// Refusal is a stable refusal name.
	Refusal string
	// Err is the underlying error (an ocipack refusal for a signer), if any.
	Err error
}

func (e *InvalidGrantError) Error() string {
	return fmt.Sprintf("%s is invalid (%s)", e.Field, e.Refusal)
}

// Unwrap returns [ErrInvalidGrant] and the underlying error.
func (e *InvalidGrantError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidGrant}
	}
	return []error{ErrInvalidGrant, e.Err}
}

// ValidateTrustPolicy is the pure check the McpTrustPolicy status reports: the namespace
// selector converts, every signer converts (TrustSourceFromPolicy: the key parses, the subject
// expression is anchored), and every egress range parses. It returns nil or an
// [*InvalidGrantError] for the first invalid field. A policy with an invalid selector or signer
// grants no signer trust (ApplicableSources); an invalid egress range is ignored by the
// ceiling.
func ValidateTrustPolicy(p *v1.McpTrustPolicy) error {
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector); err != nil {
		return &InvalidGrantError{Field: "spec.namespaceSelector", Refusal: RefusalInvalidNamespaceSelector}
	}
	for i, s := range p.Spec.Signers {
		one := *p
		one.Spec.Signers = []v1.TrustedSigner{s}
		if _, err := TrustSourceFromPolicy(&one); err != nil {
			name := ocipack.RefusalInvalidPolicy
			if n := refusal.Name(err); n != "" {
				name = n
			}
			return &InvalidGrantError{Field: fmt.Sprintf("spec.signers[%d]", i), Refusal: name, Err: err}
		}
	}
	for i, c := range p.Spec.Egress.AllowedCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			return &InvalidGrantError{Field: fmt.Sprintf("spec.egress.allowedCIDRs[%d]", i), Refusal: RefusalInvalidCIDR}
		}
	}
	return nil
}
