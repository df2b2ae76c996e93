package k8sbinding

import (
	"fmt"
	"net/http"

	"github.com/b10x/connector-mcp/egress"
)

// NewClient is the one constructor of the manager's and the gateway's free-standing outbound
// HTTP clients: the OCI registry client (pack pulls, TUF), the OAuth producer's client and the
// drift webhook's. It returns egress.NewHTTPClient(p) with deny as p.Deny, so every dial of the
// client is judged against the same cluster deny list as a freeze or a call (the apiserver's
// Service IPs and EndpointSlice addresses, the Service CIDRs, the gateway's own Service, see
// [APIServerDeny]) on top of p.IP (metadata, special-purpose ranges, loopback). deny is
// required: a nil deny list is egress.ErrInvalidPolicy, never a client without it.
//
// Endpoint bindings (a deployment's MCP server) are built by [Binder], which applies the same
// deny list through the same egress.Policy.Deny. TestEveryOutboundClientHasTheDenyList
// (cmd/manager/app) fails when a binary builds an http.Client, http.Transport or net.Dialer
// anywhere else.
func NewClient(p egress.Policy, deny DenySource) (*http.Client, error) {
	p, err := withDeny(p, deny)
	if err != nil {
		return nil, err
	}
	return egress.NewHTTPClient(p)
}

// withDeny returns p with deny as its dial-time deny list; nil deny is refused.
func withDeny(p egress.Policy, deny DenySource) (egress.Policy, error) {
	if deny == nil {
		return p, fmt.Errorf("%w: an outbound client needs the cluster deny list", egress.ErrInvalidPolicy)
	}
	p.Deny = deny
	return p, nil
}
