package mcptest

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Era selects the protocol generation a test server speaks.
type Era string

const (
	// Modern is a stateless 2026-07-28 server (it also accepts initialize).
	Modern Era = "modern"
	// Legacy is a stateful 2025-11-25-only server: it refuses 2026-07-28 requests with -32022.
	Legacy Era = "legacy"
)

// HTTPHandler serves srv over Streamable HTTP in the given era.
func HTTPHandler(srv *mcp.Server, era Era) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: era != Legacy})
}

// HTTPServer is a running loopback test server.
type HTTPServer struct {
	// URL is the MCP endpoint.
	URL string
	// Server is the go-sdk server; change its tools with SetTool at run time.
	Server *mcp.Server
	ts     *httptest.Server
}

// Close stops the server.
func (h *HTTPServer) Close() {
	h.ts.CloseClientConnections()
	h.ts.Close()
}

// StartHTTP serves srv on a loopback port in the given era.
func StartHTTP(srv *mcp.Server, era Era) *HTTPServer {
	ts := httptest.NewServer(HTTPHandler(srv, era))
	return &HTTPServer{URL: ts.URL + "/mcp", Server: srv, ts: ts}
}

// StartHTTPS serves srv over TLS on a loopback port (a self-signed test certificate; use Client
// or CertPool to trust it).
func StartHTTPS(srv *mcp.Server, era Era) *HTTPServer {
	ts := httptest.NewTLSServer(HTTPHandler(srv, era))
	return &HTTPServer{URL: ts.URL + "/mcp", Server: srv, ts: ts}
}

// Client returns an HTTP client for this server (trusting its certificate when it is TLS).
func (h *HTTPServer) Client() *http.Client { return h.ts.Client() }

// CertPool returns a pool holding the TLS server's certificate (nil for a plain server).
func (h *HTTPServer) CertPool() *x509.CertPool {
	if h.ts.Certificate() == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(h.ts.Certificate())
	return pool
}

// StartRawHTTP serves the raw engine r on a loopback port.
func StartRawHTTP(r *Raw) *HTTPServer {
	ts := httptest.NewServer(r)
	return &HTTPServer{URL: ts.URL + "/mcp", ts: ts}
}
