// Command caller is the e2e suite's agent Pod: it reads the kubelet-projected ServiceAccount token
// and the gateway's CA bundle from the files a Pod mounts as docs/gateway.md shows, POSTs one MCP
// tools/list to the gateway URL with the token as its bearer, verifying the gateway's certificate
// against the bundle only, and prints one JSON line: the HTTP status and the served certificate's
// serial. It exits 1 when no HTTP answer came (TLS or connection failure).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "", "gateway route URL, e.g. https://connector-mcp-gateway.connector-mcp-system.svc:8443/mcp/team-a/weather")
	caFile := flag.String("ca", "/etc/gateway-ca/ca.crt", "CA bundle that verifies the gateway")
	tokenFile := flag.String("token", "/var/run/secrets/tokens/gateway", "projected ServiceAccount token")
	flag.Parse()
	out := map[string]any{}
	defer func() { _ = json.NewEncoder(os.Stdout).Encode(out) }()
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		out["error"] = "read CA bundle: " + err.Error()
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		out["error"] = "CA bundle has no certificate"
		os.Exit(1)
	}
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		out["error"] = "read token: " + err.Error()
		os.Exit(1)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	req, err := http.NewRequest(http.MethodPost, *url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	if err != nil {
		out["error"] = err.Error()
		os.Exit(1)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		out["error"] = fmt.Sprintf("%T", err) + ": " + err.Error()
		os.Exit(1)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	out["status"] = resp.StatusCode
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		out["serial"] = resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
}
