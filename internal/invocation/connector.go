package invocation

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/snapshot"
)

// Endpoint is what a Connector needs to reach one deployment's server: the reviewed endpoint
// binding of the ServiceDeployment and the surface's bounds.
type Endpoint struct {
	// Namespace and Deployment identify the ServiceDeployment (its credential Secret lives in
	// Namespace).
	Namespace, Deployment string
	// URL is the Streamable HTTP endpoint (spec.mcpConnection.url).
	URL string
	// Credential optionally addresses the bearer token (spec.mcpConnection.credentialRef).
	Credential *apiv1.CredentialRef
	// AllowCIDRs are the deployment's private ranges (spec.mcpConnection.egress.allowCIDRs).
	AllowCIDRs []string
	// CABundle optionally names the connection's own CA bundle (spec.mcpConnection.caBundleRef).
	CABundle *apiv1.ConfigMapKeyRef
	// MaxArgumentBytes and MaxResultBytes are the surface's bounds; a Connector passes them on
	// to the MCP client.
	MaxArgumentBytes, MaxResultBytes int
}

// Session is a connected MCP client session. *mcpclient.Session implements it.
type Session interface {
	// ListTools freezes the live tool list.
	ListTools(ctx context.Context) (*snapshot.ToolSnapshot, error)
	// CallTool calls a remote tool and returns the complete result JSON as received; an
	// "isError" result is a *mcpclient.ToolError.
	CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	// Close ends the session.
	Close() error
}

var (
	_ Session          = (*mcpclient.Session)(nil)
	_ ToolListNotifier = (*mcpclient.Session)(nil)
	_ CachedToolLister = (*mcpclient.Session)(nil)
)

// Connector opens sessions to a deployment's server. The production Connector is
// *EgressConnector; tests may hand any session over.
type Connector interface {
	Connect(ctx context.Context, ep Endpoint) (Session, error)
}

// ConnectorFunc adapts a function to Connector.
type ConnectorFunc func(ctx context.Context, ep Endpoint) (Session, error)

// Connect calls f.
func (f ConnectorFunc) Connect(ctx context.Context, ep Endpoint) (Session, error) { return f(ctx, ep) }

// EgressConnector connects through a fresh egress port bound to the deployment's endpoint (the
// only way out: HTTPS, dial-time IP policy, byte bounds, deadlines, bearer fetched per exchange)
// with an mcpclient session on top. It is the same construction the operator's live freeze uses.
type EgressConnector struct {
	// Client negotiates and remembers protocol eras; share one per process. Nil: one private
	// client per connector.
	Client *mcpclient.Client
	// Secrets reads credential Secrets by name. Required when a deployment names a credential.
	// A Secret is spent only under k8sbinding.CheckSecret (opt-in label, allowed hosts, never a
	// ServiceAccount token) — the same rule as the manager's freeze.
	Secrets client.Reader
	// Ceilings gives each namespace's egress ceiling (k8sbinding.TrustPolicyCeilings in
	// production): a deployment's allowCIDRs must lie within it. Nil means an empty ceiling:
	// only IP.AllowCIDRs may be requested.
	Ceilings k8sbinding.CeilingSource
	// Deny adds the cluster's always-denied addresses (k8sbinding.APIServerDeny: the apiserver's
	// Service and EndpointSlice addresses, the Service CIDRs). Optional.
	Deny k8sbinding.DenySource
	// ConfigMaps reads a deployment's CA bundle ConfigMap (only one labelled
	// connectors.b10x.io/ca-bundle=true is used). Required when a deployment names one.
	ConfigMaps client.Reader
	// IP is the cluster's dial-time address policy; a deployment's allowCIDRs are added to its
	// AllowCIDRs, and the in-cluster apiserver (KUBERNETES_SERVICE_HOST, see
	// egress.APIServerPrefixes) to its DenyPrefixes, so a deployment's allow-list can never open
	// the apiserver. Add the apiserver's other endpoint addresses to DenyPrefixes yourself.
	IP egress.IPPolicy
	// Getenv reads the environment for KUBERNETES_SERVICE_HOST (nil: os.Getenv).
	Getenv func(string) string
	// TLSClientConfig optionally sets the roots (e.g. an in-cluster CA) for every endpoint
	// without its own CA bundle; nil means the system roots. InsecureSkipVerify is refused.
	TLSClientConfig *tls.Config
	// ExchangeTimeout bounds each HTTP exchange (zero: egress default).
	ExchangeTimeout time.Duration
	// MaxResponseBytes bounds each response body (zero: egress default).
	MaxResponseBytes int64
	// Limits are the MCP bounds (zero fields: mcpclient defaults); the endpoint's argument and
	// result bounds override theirs.
	Limits mcpclient.Limits

	once sync.Once
	own  *mcpclient.Client
}

var _ Connector = (*EgressConnector)(nil)

// errNoSecrets: a credential is named but the connector has no Secret reader.
var errNoSecrets = errors.New("invocation: EgressConnector has no Secrets reader for the credential")

// Connect builds the egress port for ep with the same k8sbinding.Binder construction as the
// manager's freeze, and connects an mcpclient session through it.
func (c *EgressConnector) Connect(ctx context.Context, ep Endpoint) (Session, error) {
	ip := c.IP
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ip.DenyPrefixes = append(slices.Clone(ip.DenyPrefixes), egress.APIServerPrefixes(getenv)...)
	req := k8sbinding.Request{Namespace: ep.Namespace, URL: ep.URL, AllowCIDRs: ep.AllowCIDRs}
	if ep.Credential != nil {
		if c.Secrets == nil {
			return nil, errNoSecrets
		}
		req.Credential = &egress.CredentialRef{Name: ep.Credential.Name, Key: ep.Credential.Key}
	}
	if ep.CABundle != nil {
		req.CABundle = &k8sbinding.CABundleRef{Name: ep.CABundle.Name, Key: ep.CABundle.Key}
	}
	b := &k8sbinding.Binder{
		Base:    egress.Policy{IP: ip, TLSClientConfig: c.TLSClientConfig, Timeout: c.ExchangeTimeout, MaxResponseBytes: c.MaxResponseBytes},
		Secrets: c.Secrets, Ceilings: c.Ceilings, Deny: c.Deny, ConfigMaps: c.ConfigMaps,
	}
	tr, err := b.Transport(ctx, req)
	if err != nil {
		return nil, err
	}
	lim := c.Limits
	if ep.MaxArgumentBytes > 0 {
		lim.MaxArgumentBytes = ep.MaxArgumentBytes
	}
	if ep.MaxResultBytes > 0 {
		lim.MaxResultBytes = ep.MaxResultBytes
	}
	cfg := mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: ep.URL, HTTPClient: tr.HTTPClient()}, Limits: lim}
	mc := c.client()
	sess, err := mc.Connect(ctx, cfg)
	if err != nil {
		// The server may have changed era since the last connect: negotiate afresh next time.
		mc.ForgetEra(cfg)
		tr.CloseIdleConnections()
		return nil, err
	}
	return &egressSession{Session: sess, tr: tr}, nil
}

func (c *EgressConnector) client() *mcpclient.Client {
	if c.Client != nil {
		return c.Client
	}
	c.once.Do(func() { c.own = mcpclient.NewClient(nil) })
	return c.own
}

// egressSession closes its egress port with the session.
type egressSession struct {
	*mcpclient.Session
	tr *egress.Transport
}

func (s *egressSession) Close() error {
	err := s.Session.Close()
	s.tr.CloseIdleConnections()
	return err
}
