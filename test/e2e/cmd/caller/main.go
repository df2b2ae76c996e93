// Command caller is the e2e suite's agent Pod: it reads the kubelet-projected ServiceAccount token
// and the gateway's CA bundle from the files a Pod mounts as docs/gateway.md shows, and verifies
// the gateway's certificate against the bundle only.
//
// It first POSTs one MCP tools/list to the gateway URL with the token as its bearer and records the
// HTTP status and the served certificate's serial. With --call OP it then connects with the go-sdk
// client (as an agent would), lists the tools and calls OP with --args. With --repeat-for D it
// keeps calling OP for D, each call retried as docs/gateway.md tells callers (HTTP 503 or 429, or
// a connection that failed before any answer), and counts the calls that failed even so.
//
// It prints JSON lines: {"started":true} when a repeat run begins, one line per call that failed
// after its retries, and the outcome last. It exits 1 when the first request got no HTTP answer.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	url := flag.String("url", "", "gateway route URL, e.g. https://connector-mcp-gateway.connector-mcp-system.svc:8443/mcp/team-a/weather")
	caFile := flag.String("ca", "/etc/connector-mcp-ca/ca.crt", "CA bundle that verifies the gateway")
	tokenFile := flag.String("token", "/var/run/secrets/connector-mcp/token", "projected ServiceAccount token")
	op := flag.String("call", "", "operation (tool name as the gateway lists it) to call with the go-sdk client")
	args := flag.String("args", "{}", "JSON object of arguments for --call")
	repeat := flag.Duration("repeat-for", 0, "with --call: keep calling for this long, retrying as documented")
	flag.Parse()
	out := map[string]any{}
	hc, token, err := clientFor(*caFile, *tokenFile)
	if err != nil {
		out["error"] = err.Error()
		emit(out)
		os.Exit(1)
	}
	probe(hc, *url, token, out)
	if _, ok := out["status"]; !ok {
		emit(out)
		os.Exit(1)
	}
	if *op != "" && out["status"] == http.StatusOK {
		var a map[string]any
		if err := json.Unmarshal([]byte(*args), &a); err != nil {
			out["error"] = "--args: " + err.Error()
		} else if *repeat > 0 {
			repeatCalls(hc, *url, token, *op, a, *repeat, out)
		} else {
			callOnce(hc, *url, token, *op, a, out)
		}
	}
	emit(out)
}

func emit(v any) { _ = json.NewEncoder(os.Stdout).Encode(v) }

// clientFor reads the CA bundle and the token: an HTTP client that trusts only the bundle.
func clientFor(caFile, tokenFile string) (*http.Client, string, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, "", fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, "", errors.New("CA bundle has no certificate")
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, "", fmt.Errorf("read token: %w", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	return hc, strings.TrimSpace(string(token)), nil
}

// probe makes the raw tools/list request: out gets "status" and "serial", or "error".
func probe(hc *http.Client, url, token string, out map[string]any) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	if err != nil {
		out["error"] = err.Error()
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		out["error"] = fmt.Sprintf("%T", err) + ": " + err.Error()
		return
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	out["status"] = resp.StatusCode
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		out["serial"] = resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
}

// bearer adds the token to every request and remembers the status of the last answer (0: the
// exchange failed before any answer), so that a failed call can be classified.
type bearer struct {
	token string
	next  http.RoundTripper
	mu    sync.Mutex
	last  int
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.next.RoundTrip(r)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = 0
	if err == nil {
		b.last = resp.StatusCode
	}
	return resp, err
}

func (b *bearer) lastStatus() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// session connects with the go-sdk client through the gateway.
func session(ctx context.Context, hc *http.Client, url, token string) (*mcp.ClientSession, *bearer, error) {
	b := &bearer{token: token, next: hc.Transport}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: b, Timeout: hc.Timeout},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	return cs, b, err
}

// callOnce lists the tools and calls op: out gets "tools", "protocol", "text" and "isError", or
// "callError".
func callOnce(hc *http.Client, url, token, op string, args map[string]any, out map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, _, err := session(ctx, hc, url, token)
	if err != nil {
		out["callError"] = "connect: " + err.Error()
		return
	}
	defer func() { _ = cs.Close() }()
	out["protocol"] = cs.InitializeResult().ProtocolVersion
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		out["callError"] = "tools/list: " + err.Error()
		return
	}
	var names []string
	for _, t := range lt.Tools {
		names = append(names, t.Name)
	}
	out["tools"] = names
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: op, Arguments: args})
	if err != nil {
		out["callError"] = "tools/call: " + err.Error()
		return
	}
	out["isError"] = res.IsError
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	out["text"] = strings.Join(text, "\n")
}

// retryable is docs/gateway.md's rule for callers: an answer of 503 (shutting_down, overloaded)
// or 429 (Retry-After), or an exchange that failed before any answer, is tried again.
func retryable(status int) bool {
	return status == 0 || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// repeatCalls calls op (a fresh session each time) until d has passed: out gets "calls",
// "retried" and "failed".
func repeatCalls(hc *http.Client, url, token, op string, args map[string]any, d time.Duration, out map[string]any) {
	emit(map[string]any{"started": true})
	end := time.Now().Add(d)
	calls, retried, failed := 0, 0, 0
	for time.Now().Before(end) {
		calls++
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			var status int
			if status, err = callRetryable(hc, url, token, op, args); err == nil || !retryable(status) {
				break
			}
			retried++
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			failed++
			emit(map[string]any{"failed": err.Error()})
		}
		time.Sleep(100 * time.Millisecond)
	}
	out["calls"], out["retried"], out["failed"] = calls, retried, failed
}

// callRetryable makes one call and returns the status of the last HTTP answer and its error.
func callRetryable(hc *http.Client, url, token, op string, args map[string]any) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, b, err := session(ctx, hc, url, token)
	if err != nil {
		return b.lastStatus(), err
	}
	defer func() { _ = cs.Close() }()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: op, Arguments: args})
	if err != nil {
		return b.lastStatus(), err
	}
	if res.IsError {
		return http.StatusOK, errors.New("isError result")
	}
	return http.StatusOK, nil
}
