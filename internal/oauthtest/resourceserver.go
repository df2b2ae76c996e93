package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Scopes of the protected MCP server: BaseScope for any request, AdminScope additionally for the
// tool named "admin" (to exercise step-up authorization).
const (
	BaseScope  = "mcp:tools"
	AdminScope = "mcp:admin"
)

// ResourceServer is a go-sdk MCP server on loopback whose endpoint (URL) requires bearer tokens
// minted by its current authorization server for exactly this resource. Its protected-resource
// metadata (RFC 9728) is served at the path-inserted well-known URL and named in every challenge.
type ResourceServer struct {
	// URL is the MCP endpoint and the resource identifier.
	URL string

	srv *httptest.Server

	mu        sync.Mutex
	as        *AuthServer
	next      *AuthServer
	presented []string
}

// NewResourceServer starts a protected MCP server trusting as; it stops when the test ends.
// Tools: "echo" (needs BaseScope) and "admin" (needs BaseScope and AdminScope).
func NewResourceServer(t testing.TB, as *AuthServer) *ResourceServer {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	type in struct {
		Text string `json:"text,omitempty"`
	}
	for _, name := range []string{"echo", "admin"} {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: "test tool"},
			func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + a.Text}}}, nil, nil
			})
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true})
	rs := &ResourceServer{as: as}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", rs.metadata)
	mux.Handle("/mcp", rs.protect(mcpHandler))
	rs.srv = httptest.NewServer(mux)
	rs.URL = rs.srv.URL + "/mcp"
	t.Cleanup(rs.srv.Close)
	return rs
}

// MigrateTo makes the server trust only a different authorization server from now on.
func (rs *ResourceServer) MigrateTo(as *AuthServer) {
	rs.mu.Lock()
	rs.as = as
	rs.mu.Unlock()
}

// MigrateAfterNextMetadata makes the server name as in its metadata from the second metadata
// request on (and trust only as from then): a migration in the middle of a client's flow.
func (rs *ResourceServer) MigrateAfterNextMetadata(as *AuthServer) {
	rs.mu.Lock()
	rs.next = as
	rs.mu.Unlock()
}

// Presented returns every bearer token the server has received, in order.
func (rs *ResourceServer) Presented() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.presented)
}

func (rs *ResourceServer) metadataURL() string {
	return rs.srv.URL + "/.well-known/oauth-protected-resource/mcp"
}

func (rs *ResourceServer) metadata(w http.ResponseWriter, _ *http.Request) {
	rs.mu.Lock()
	issuer := rs.as.Issuer
	if rs.next != nil {
		rs.as, rs.next = rs.next, nil
	}
	rs.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":              rs.URL,
		"authorization_servers": []string{issuer},
		"scopes_supported":      []string{BaseScope},
	})
}

func (rs *ResourceServer) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		as := rs.as
		tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if bearer {
			rs.presented = append(rs.presented, tok)
		}
		rs.mu.Unlock()
		g, ok := as.Introspect(tok)
		if !bearer || !ok || g.Resource != rs.URL || !slices.Contains(g.Scopes, BaseScope) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+rs.metadataURL()+`", scope="`+BaseScope+`"`)
			http.Error(w, ServerProse, http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, ServerProse, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method == "tools/call" && msg.Params.Name == "admin" && !slices.Contains(g.Scopes, AdminScope) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+AdminScope+`", resource_metadata="`+rs.metadataURL()+`", error_description="`+ServerProse+`"`)
			http.Error(w, ServerProse, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
