package mcptest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/devnode"
)

func TestMain(m *testing.M) {
	RunIfServer()
	os.Exit(m.Run())
}

// TestSampleHTTPServer runs the program as the quickstart does (--http ADDR --tools FILE) in both
// eras and lists its tools with a bare go-sdk client.
func TestSampleHTTPServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(`[{"name":"search_issues","description":"Search.","inputSchema":{"type":"object"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			line := startHTTPServer(t, "--http", "127.0.0.1:0", "--era", era, "--tools", path)
			i := strings.Index(line, "http://")
			if i < 0 || !strings.Contains(line, era) {
				t.Fatalf("startup line %q", line)
			}
			url := strings.TrimSpace(line[i:])
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			want := map[string]string{"modern": "2026-07-28", "legacy": "2025-11-25"}[era]
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Fatalf("protocol %s, want %s", got, want)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != 1 || res.Tools[0].Name != "search_issues" {
				t.Fatalf("tools = %+v", res.Tools)
			}
		})
	}
}

// TestSampleHTTPSServer: with --tls-cert and --tls-key the program serves HTTPS (the e2e suite's
// upstream Pod); a go-sdk client trusting the issuing CA lists its tools, one trusting only the
// system roots fails the handshake, and a key without a certificate is a usage error.
func TestSampleHTTPSServer(t *testing.T) {
	dir := t.TempDir()
	ca, err := devnode.NewCA("mcptest CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("127.0.0.1", nil, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM,
		"tools.json": []byte(`[{"name":"search_issues","description":"Search.","inputSchema":{"type":"object"}}]`)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code := Main([]string{"--http", "127.0.0.1:0", "--tls-key", filepath.Join(dir, "tls.key")}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--tls-key without --tls-cert: exit %d, want 2", code)
	}
	line := startHTTPServer(t, "--http", "127.0.0.1:0", "--tools", filepath.Join(dir, "tools.json"),
		"--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key"))
	i := strings.Index(line, "https://")
	if i < 0 {
		t.Fatalf("startup line %q names no https URL", line)
	}
	url := strings.TrimSpace(line[i:])
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: trusting, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "search_issues" {
		t.Fatalf("tools = %+v", res.Tools)
	}
	if cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil); err == nil {
		cs.Close()
		t.Fatal("a client without the CA connected: the server is not serving the given certificate")
	}
}

// startHTTPServer runs the program with flags (the test's cleanup kills it) and returns its
// startup line, which names the URL it serves.
func startHTTPServer(t *testing.T, flags ...string) string {
	t.Helper()
	argv := StdioArgv(flags...)
	cmd := exec.CommandContext(context.Background(), argv[0], argv[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}
