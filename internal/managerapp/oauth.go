package managerapp

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// producerHTTPClient is the OAuth producer's client: discovery and token requests obey the same
// dial-time IP policy and cluster deny list as freezes (an McpCredential's URLs are a tenant's
// choice).
func producerHTTPClient(ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, timeout time.Duration) (*http.Client, error) {
	return k8sbinding.NewClient(egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: timeout, MaxResponseBytes: oauth.MaxResponseBytes}, deny)
}
