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
	caFile := flag.String("ca", "/etc/connector-mcp-ca/ca.crt", "CA bundle that verifies the gateway")
	tokenFile := flag.String("token", "/var/run/secrets/connector-mcp/token", "projected ServiceAccount token")
	flag.Parse()
	out := call(*url, *caFile, *tokenFile)
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if _, ok := out["status"]; !ok {
		os.Exit(1)
	}
}

// call makes the request and describes its outcome: "status" and "serial", or "error".
func call(url, caFile, tokenFile string) map[string]any {
	out := map[string]any{}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		out["error"] = "read CA bundle: " + err.Error()
		return out
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		out["error"] = "CA bundle has no certificate"
		return out
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		out["error"] = "read token: " + err.Error()
		return out
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	if err != nil {
		out["error"] = err.Error()
		return out
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		out["error"] = fmt.Sprintf("%T", err) + ": " + err.Error()
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	out["status"] = resp.StatusCode
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		out["serial"] = resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	return out
}
