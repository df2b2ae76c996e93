package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

const e2eToken = "e2e-bearer-7f3a9c" //nolint:gosec // test fixture, not a credential

// authLog records the Authorization header of every request a test server receives.
type authLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD Authorization"
}

func (l *authLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.Header.Get("Authorization"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *authLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// requireBearer answers 401 unless the request carries the expected bearer.
func requireBearer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+e2eToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func listen(t *testing.T, host string, h http.Handler) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// post sends an empty JSON POST with hc and returns the error.
func post(hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func e2eServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	for _, tool := range mcptest.DefaultTools() {
		s.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	return s
}

// TestEndToEndSnapshotWithBearer: mcpclient snapshots a go-sdk HTTP server (both eras) through
// the egress port, with the bearer read per exchange from a Kubernetes Secret (fake client).
// Server side proof that the token went only there: every request the MCP server received
// carried it, and a second server in the allow-listed range — reachable by the IP policy —
// received nothing, neither by a direct request on the port nor by a redirect.
//
// Only loopback is reachable here: the "in-cluster" range is 127.0.0.5 and 127.0.0.7 with the
// LoopbackByCIDRUnsafe knob.
func TestEndToEndSnapshotWithBearer(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		t.Run(string(era), func(t *testing.T) {
			var atServer, atOther authLog
			mux := http.NewServeMux()
			mux.Handle("/mcp", mcptest.HTTPHandler(e2eServer(), era))
			other := listen(t, "127.0.0.7", atOther.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "{}")
			})))
			mux.Handle("/elsewhere", http.RedirectHandler(other+"/collect", http.StatusTemporaryRedirect))
			base := listen(t, "127.0.0.5", atServer.wrap(requireBearer(mux)))

			store := egress.SecretStoreFunc(func(_ context.Context, ref egress.CredentialRef) ([]byte, error) {
				if ref != (egress.CredentialRef{Name: "mcp-bearer", Key: "token"}) {
					return nil, &egress.CredentialError{Ref: ref, Reason: "secret not found"}
				}
				return []byte(e2eToken + "\n"), nil
			})
			port, err := egress.NewTransport(egress.Policy{
				Endpoint: base + "/mcp",
				IP: egress.IPPolicy{
					Loopback:   egress.LoopbackByCIDRUnsafe,
					AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32"), netip.MustParsePrefix("127.0.0.7/32")},
				},
				Credential:   &egress.CredentialRef{Name: "mcp-bearer", Key: "token"},
				Secrets:      store,
				MaxRedirects: 2,
				Timeout:      10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer port.CloseIdleConnections()

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sess, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{
				HTTP: &mcpclient.HTTPServer{URL: base + "/mcp", HTTPClient: port.HTTPClient()},
			})
			if err != nil {
				t.Fatalf("connect through the port: %v", err)
			}
			snap, err := sess.ListTools(ctx)
			if err != nil {
				t.Fatalf("snapshot through the port: %v", err)
			}
			if err := sess.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			if len(snap.Tools) != len(mcptest.DefaultTools()) || !strings.HasPrefix(snap.Digest, "sha256:") {
				t.Fatalf("snapshot: %d tools, digest %q", len(snap.Tools), snap.Digest)
			}

			// The port reaches only its endpoint: a direct request elsewhere and a redirect
			// elsewhere are refused before the other server sees anything.
			hc := port.HTTPClient()
			if err := post(hc, other+"/collect"); !errors.Is(err, egress.ErrDestinationRefused) {
				t.Fatalf("direct request to the other server: %v", err)
			}
			if err := post(hc, base+"/elsewhere"); !errors.Is(err, egress.ErrRedirectRefused) {
				t.Fatalf("redirect to the other server: %v", err)
			}

			got := atServer.all()
			if len(got) < 3 {
				t.Fatalf("MCP server saw %d requests: %v", len(got), got)
			}
			for _, r := range got {
				if !strings.HasSuffix(r, " Bearer "+e2eToken) {
					t.Errorf("MCP server request without the bearer: %q", strings.ReplaceAll(r, e2eToken, "<token>"))
				}
				if strings.HasPrefix(r, "GET ") {
					t.Errorf("MCP server saw a GET: the standalone stream must be declined")
				}
			}
			if era == mcptest.Legacy {
				deletes := 0
				for _, r := range got {
					if strings.HasPrefix(r, "DELETE ") {
						deletes++
					}
				}
				if deletes != 1 {
					t.Errorf("stateful server saw %d session DELETEs, want 1 through the port", deletes)
				}
			}
			if o := atOther.all(); len(o) != 0 {
				t.Fatalf("the other server received %d requests", len(o))
			}
			t.Logf("%s: %d requests at the MCP server, all with the bearer; snapshot %s", era, len(got), snap.Digest)
		})
	}
}
