package k8sbinding_test

import (
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// A Secret is spent only for the hosts it names, and never when it does not opt in.
func ExampleCheckSecret() {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "github-mcp",
			Labels:      map[string]string{apiv1.CredentialLabel: "true"},
			Annotations: map[string]string{apiv1.CredentialAllowedHostsAnnotation: "mcp.github.example"}},
		Data: map[string][]byte{"token": []byte("value")},
	}
	ref := egress.CredentialRef{Name: "github-mcp", Key: "token"}
	for _, endpoint := range []string{"https://mcp.github.example/mcp", "https://collector.attacker.example/mcp"} {
		_, err := k8sbinding.CheckSecret(sec, ref, endpoint)
		var refusal *k8sbinding.CredentialRefusal
		if errors.As(err, &refusal) {
			fmt.Println(endpoint, "refused:", refusal.Refusal())
			continue
		}
		fmt.Println(endpoint, "spent")
	}
	// Output:
	// https://mcp.github.example/mcp spent
	// https://collector.attacker.example/mcp refused: credential_host_not_allowed
}

// A deployment's allowCIDRs must lie within its namespace's ceiling.
func ExampleCheckCeiling() {
	ceiling := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}
	fmt.Println(k8sbinding.CheckCeiling([]string{"10.20.4.0/24"}, ceiling))
	fmt.Println(k8sbinding.CheckCeiling([]string{"10.0.0.0/8"}, ceiling))
	// Output:
	// <nil>
	// k8sbinding: allowCIDRs entry "10.0.0.0/8" is beyond the namespace's egress ceiling
}
