package k8sbinding

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
)

// CeilingSource returns the private ranges a namespace's deployments may open.
type CeilingSource interface {
	// Ceiling returns the ceiling of namespace; an error means it could not be read (callers
	// fail closed).
	Ceiling(ctx context.Context, namespace string) ([]netip.Prefix, error)
}

// TrustPolicyCeilings is the production [CeilingSource]: the union of spec.egress.allowedCIDRs
// of every McpTrustPolicy whose namespaceSelector selects the namespace, plus Cluster (the
// manager's --egress-allow-cidr). An invalid selector or CIDR in a policy contributes nothing.
type TrustPolicyCeilings struct {
	// Reader reads Namespaces and McpTrustPolicies (the manager's cache).
	Reader client.Reader
	// Cluster are the ranges every namespace may open.
	Cluster []netip.Prefix
}

// Ceiling implements [CeilingSource].
func (c *TrustPolicyCeilings) Ceiling(ctx context.Context, namespace string) ([]netip.Prefix, error) {
	out := slices.Clone(c.Cluster)
	policies, err := SelectingTrustPolicies(ctx, c.Reader, namespace)
	if err != nil {
		return nil, err
	}
	for _, tp := range policies {
		for _, s := range tp.Spec.Egress.AllowedCIDRs {
			if pfx, err := netip.ParsePrefix(s); err == nil {
				out = append(out, pfx.Masked())
			}
		}
	}
	return out, nil
}

// SelectingTrustPolicies returns the McpTrustPolicies whose namespaceSelector selects namespace
// (read with reader: the Namespace's labels and every policy). A policy with an invalid selector
// selects nothing. Every ceiling a namespace's policies grant (egress ranges, OAuth issuers) is
// resolved through it; an error means the ceiling could not be read (callers fail closed).
func SelectingTrustPolicies(ctx context.Context, reader client.Reader, namespace string) ([]*apiv1.McpTrustPolicy, error) {
	var ns corev1.Namespace
	if err := reader.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return nil, fmt.Errorf("k8sbinding: read namespace: %s", apierrors.ReasonForError(err))
	}
	var list apiv1.McpTrustPolicyList
	if err := reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("k8sbinding: list McpTrustPolicies: %s", apierrors.ReasonForError(err))
	}
	set := labels.Set(ns.Labels)
	var out []*apiv1.McpTrustPolicy
	for i := range list.Items {
		tp := &list.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(&tp.Spec.NamespaceSelector)
		if err != nil || !sel.Matches(set) {
			continue
		}
		out = append(out, tp)
	}
	return out, nil
}

// RefusalEgressCeiling is the refusal name of a deployment's allowCIDRs entry that no ceiling
// range contains.
const RefusalEgressCeiling = "egress_ceiling_exceeded"

// ErrEgressCeiling matches every [*CeilingError].
var ErrEgressCeiling = errors.New("k8sbinding: allowCIDRs beyond the namespace's egress ceiling")

// CeilingError is the refusal egress_ceiling_exceeded: Entry (as the tenant wrote it) is not
// contained in any range of the namespace's ceiling. It does not list the ceiling.
type CeilingError struct {
	// Entry is the refused allowCIDRs entry.
	Entry string
}

func (e *CeilingError) Error() string {
	return fmt.Sprintf("k8sbinding: allowCIDRs entry %q is beyond the namespace's egress ceiling", e.Entry)
}

// Refusal returns "egress_ceiling_exceeded".
func (e *CeilingError) Refusal() string { return RefusalEgressCeiling }

// Unwrap returns [ErrEgressCeiling].
func (e *CeilingError) Unwrap() error { return ErrEgressCeiling }

// CheckCeiling refuses the first requested entry (a CIDR or a single address) that is not
// contained in one prefix of ceiling. An unparseable entry is refused the same way.
func CheckCeiling(requested []string, ceiling []netip.Prefix) error {
	for _, e := range requested {
		p, err := parseEntry(e)
		if err != nil {
			return &CeilingError{Entry: e}
		}
		if !contained(p, ceiling) {
			return &CeilingError{Entry: e}
		}
	}
	return nil
}

func parseEntry(e string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(e); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// contained reports whether p lies within one prefix of set (same family, at least as long).
func contained(p netip.Prefix, set []netip.Prefix) bool {
	for _, c := range set {
		if c.Addr().Is4() == p.Addr().Is4() && c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// DenySource returns the cluster addresses that are always denied: [egress.DenySource], read
// by the guarded dialer at dial time (egress.Policy.Deny) and by [Binder.Check] before it.
type DenySource = egress.DenySource

// DenyFunc adapts a function to [DenySource].
type DenyFunc = egress.DenyFunc

// APIServerDeny is the production [DenySource]: Static (the --service-cidr flags and the
// apiserver address the manager was configured with) plus, read from the cluster and
// remembered for TTL: the cluster IPs of Service default/kubernetes (both families), the
// addresses of its EndpointSlices, the same for every Service of Services (the gateway's own,
// so that no deployment sends outbound MCP back into the hosted route), and every ServiceCIDR
// (networking.k8s.io/v1) when the API exists.
type APIServerDeny struct {
	// Reader reads Services, EndpointSlices and ServiceCIDRs; the manager gives it its uncached
	// API reader.
	Reader client.Reader
	// Static prefixes are always denied.
	Static []netip.Prefix
	// Services are further Services whose cluster IPs and EndpointSlice addresses are denied
	// like the apiserver's (the gateway's own Service, --gateway-service). A Service that does
	// not exist contributes nothing.
	Services []types.NamespacedName
	// TTL is how long a read is reused (zero: 30 s).
	TTL time.Duration

	mu   sync.Mutex
	at   time.Time
	have bool
	last []netip.Prefix
}

// Deny implements [DenySource].
func (d *APIServerDeny) Deny(ctx context.Context) ([]netip.Prefix, error) {
	ttl := d.TTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.have && time.Since(d.at) < ttl {
		return d.last, nil
	}
	out := slices.Clone(d.Static)
	if d.Reader != nil {
		read, err := d.read(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, read...)
	}
	d.last, d.at, d.have = out, time.Now(), true
	return out, nil
}

func (d *APIServerDeny) read(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	addAddr := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.WithZone("").Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	services := append([]types.NamespacedName{{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}}, d.Services...)
	for _, name := range services {
		var svc corev1.Service
		switch err := d.Reader.Get(ctx, name, &svc); {
		case err == nil:
			addAddr(svc.Spec.ClusterIP)
			for _, ip := range svc.Spec.ClusterIPs {
				addAddr(ip)
			}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("k8sbinding: read Service %s: %s", name, apierrors.ReasonForError(err))
		}
		var slices discoveryv1.EndpointSliceList
		if err := d.Reader.List(ctx, &slices, client.InNamespace(name.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: name.Name}); err != nil {
			return nil, fmt.Errorf("k8sbinding: list the EndpointSlices of Service %s: %s", name, apierrors.ReasonForError(err))
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				for _, a := range ep.Addresses {
					addAddr(a)
				}
			}
		}
	}
	var cidrs networkingv1.ServiceCIDRList
	if err := d.Reader.List(ctx, &cidrs); err != nil {
		if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("k8sbinding: list ServiceCIDRs: %s", apierrors.ReasonForError(err))
		}
	}
	for _, sc := range cidrs.Items {
		for _, c := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

// CredentialCacheSelector returns the controller-runtime cache entry that restricts the
// manager's Secret informer to Secrets labelled apiv1.CredentialLabel="true": add it to
// cache.Options.ByObject for &corev1.Secret{}.
func CredentialCacheSelector() cache.ByObject {
	return cache.ByObject{Label: labels.SelectorFromSet(labels.Set{apiv1.CredentialLabel: "true"})}
}

// ParseServiceName parses a "<namespace>/<name>" Service reference (the --gateway-service
// flag); empty gives the zero name and ok.
func ParseServiceName(s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%w: %q is not <namespace>/<name>", egress.ErrInvalidPolicy, s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// CeilingFunc adapts a function to [CeilingSource].
type CeilingFunc func(ctx context.Context, namespace string) ([]netip.Prefix, error)

// Ceiling calls f.
func (f CeilingFunc) Ceiling(ctx context.Context, namespace string) ([]netip.Prefix, error) {
	return f(ctx, namespace)
}
