package k8sbinding

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
)

const endpoint = "https://mcp.example.com/mcp"

func secret(typ corev1.SecretType, labelled bool, hosts string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tok"}, Type: typ,
		Data: map[string][]byte{"token": []byte("s3cret-value")}}
	if labelled {
		s.Labels = map[string]string{apiv1.CredentialLabel: "true"}
	}
	if hosts != "" {
		s.Annotations = map[string]string{apiv1.CredentialAllowedHostsAnnotation: hosts}
	}
	return s
}

// produced is an opted-in Secret an OAuth producer marked with state.
func produced(state string) *corev1.Secret {
	s := secret(corev1.SecretTypeOpaque, true, "mcp.example.com")
	s.Annotations[apiv1.CredentialStateAnnotation] = state
	return s
}

// CheckSecret spends only an opted-in Secret for a host it names; each refusal is named and
// carries nothing of the value.
func TestCheckSecret(t *testing.T) {
	ref := egress.CredentialRef{Name: "tok", Key: "token"}
	for _, c := range []struct {
		name     string
		sec      *corev1.Secret
		endpoint string
		want     string // refusal name; "" = spent
	}{
		{"opted in for the host", secret(corev1.SecretTypeOpaque, true, "mcp.example.com"), endpoint, ""},
		{"host:port, default port", secret(corev1.SecretTypeOpaque, true, "other, MCP.example.com.:443"), endpoint, ""},
		{"trailing dot in the URL", secret("", true, "mcp.example.com"), "https://mcp.example.com./mcp", ""},
		{"IPv6 literal", secret("", true, "[fd00::1]:8443"), "https://[fd00::1]:8443/mcp", ""},
		{"no label", secret(corev1.SecretTypeOpaque, false, "mcp.example.com"), endpoint, RefusalCredentialNotOptedIn},
		{"label false", func() *corev1.Secret {
			s := secret(corev1.SecretTypeOpaque, true, "mcp.example.com")
			s.Labels[apiv1.CredentialLabel] = "false"
			return s
		}(), endpoint, RefusalCredentialNotOptedIn},
		{"no annotation", secret(corev1.SecretTypeOpaque, true, ""), endpoint, RefusalCredentialHostNotAllowed},
		{"another host", secret(corev1.SecretTypeOpaque, true, "mcp.example.org"), endpoint, RefusalCredentialHostNotAllowed},
		{"suffix is not the host", secret(corev1.SecretTypeOpaque, true, "example.com"), endpoint, RefusalCredentialHostNotAllowed},
		{"another port", secret(corev1.SecretTypeOpaque, true, "mcp.example.com:8443"), endpoint, RefusalCredentialHostNotAllowed},
		{"service-account token", secret(corev1.SecretTypeServiceAccountToken, true, "mcp.example.com"), endpoint, RefusalCredentialServiceAccountToken},
		{"producer state Ready", produced(apiv1.CredentialStateReady), endpoint, ""},
		{"producer state ReauthorizationRequired", produced(ReasonReauthorizationRequired), endpoint, RefusalCredentialReauthorizationRequired},
		{"producer state IssuerMismatch", produced("IssuerMismatch"), endpoint, RefusalCredentialUnusable},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := CheckSecret(c.sec, ref, c.endpoint)
			if c.want == "" {
				if err != nil || string(v) != "s3cret-value" {
					t.Fatalf("got %q, %v", v, err)
				}
				v[0] = 'X'
				if string(c.sec.Data["token"]) != "s3cret-value" {
					t.Fatal("CheckSecret handed out the Secret's own memory")
				}
				return
			}
			var r *CredentialRefusal
			if !errors.As(err, &r) || r.Refusal() != c.want || !errors.Is(err, ErrCredentialRefused) {
				t.Fatalf("got %v, want refusal %s", err, c.want)
			}
			if v != nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "example") {
				t.Fatalf("refusal carries the value or the annotation: %v", err)
			}
			if r.Transient() != (c.want == RefusalCredentialNotOptedIn) {
				t.Fatalf("Transient() = %v", r.Transient())
			}
		})
	}
	if _, err := CheckSecret(secret("", true, "mcp.example.com"), egress.CredentialRef{Name: "tok", Key: "absent"}, endpoint); !errors.Is(err, egress.ErrCredentialUnavailable) {
		t.Fatalf("missing key: %v", err)
	}
}

// CheckCeiling: every requested entry must lie within one ceiling range of its family.
func TestCheckCeiling(t *testing.T) {
	ceiling := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1::/64")}
	for _, ok := range [][]string{nil, {"10.20.0.0/16"}, {"10.20.3.0/24", "10.20.9.9"}, {"fd00:1::5/128"}} {
		if err := CheckCeiling(ok, ceiling); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"10.0.0.0/8"}, {"10.20.0.0/15"}, {"10.21.0.1"}, {"10.20.0.0/24", "192.168.0.0/16"}, {"::ffff:10.20.0.0/112"}, {"fd00::/8"}, {"nonsense"}} {
		err := CheckCeiling(bad, ceiling)
		var ce *CeilingError
		if !errors.As(err, &ce) || ce.Refusal() != RefusalEgressCeiling || !errors.Is(err, ErrEgressCeiling) {
			t.Errorf("%v: got %v, want %s", bad, err, RefusalEgressCeiling)
		}
	}
	if err := CheckCeiling([]string{"10.20.0.0/24"}, nil); !errors.Is(err, ErrEgressCeiling) {
		t.Errorf("an empty ceiling allowed a range: %v", err)
	}
}

// The Binder judges the ceiling and a literal destination before any port exists, and adds
// the cluster deny list whatever allowCIDRs say. Twins: inside the ceiling passes.
func TestBinderPolicy(t *testing.T) {
	ceil := CeilingFunc(func(_ context.Context, ns string) ([]netip.Prefix, error) {
		if ns == "team-a" {
			return []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, nil
		}
		return nil, nil
	})
	deny := DenyFunc(func(context.Context) ([]netip.Prefix, error) {
		return []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.1.2.3/32")}, nil
	})
	b := &Binder{Ceilings: ceil, Deny: deny}
	ctx := context.Background()
	if err := b.Check(ctx, Request{Namespace: "team-a", URL: "https://10.5.0.1/mcp", AllowCIDRs: []string{"10.5.0.0/16"}}); err != nil {
		t.Fatalf("inside the ceiling: %v", err)
	}
	if err := b.Check(ctx, Request{Namespace: "team-b", URL: "https://10.5.0.1/mcp", AllowCIDRs: []string{"10.5.0.0/16"}}); !errors.Is(err, ErrEgressCeiling) {
		t.Fatalf("another namespace's ceiling: %v", err)
	}
	for _, u := range []string{"https://10.96.0.1/mcp", "https://10.1.2.3/mcp", "https://[::ffff:10.1.2.3]/mcp", "https://[fd00:ec2::254]/mcp", "https://[64:ff9b::a9fe:a9fe]/"} {
		err := b.Check(ctx, Request{Namespace: "team-a", URL: u, AllowCIDRs: []string{"10.0.0.0/8"}})
		if !errors.Is(err, egress.ErrDestinationRefused) {
			t.Errorf("%s: got %v, want destination_refused before any dial", u, err)
		}
	}
	failing := &Binder{Ceilings: CeilingFunc(func(context.Context, string) ([]netip.Prefix, error) { return nil, errors.New("boom") })}
	if err := failing.Check(ctx, Request{Namespace: "team-a", URL: "https://h/", AllowCIDRs: []string{"10.0.0.0/8"}}); !errors.Is(err, ErrClusterPolicyUnavailable) {
		t.Fatalf("unreadable ceiling: %v", err)
	}
}
