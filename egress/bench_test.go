package egress

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkExchangeOverhead measures one small JSON POST exchange on loopback through the
// egress port (Transport.HTTPClient, as handed to go-sdk) and through a plain http.Client, in
// alternation, and reports both costs and their ratio (egress/plain).
func BenchmarkExchangeOverhead(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`
	srv := serveOnB(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	tr, err := NewTransport(Policy{Endpoint: srv + "/mcp", IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	plainT := &http.Transport{}
	defer plainT.CloseIdleConnections()
	clients := []*http.Client{{Transport: plainT}, tr.HTTPClient()}
	do := func(c *http.Client) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(body)) {
			b.Fatalf("read %d bytes", n)
		}
	}
	for _, c := range clients { // warm both connection pools
		do(c)
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, c := range clients {
			start := time.Now()
			do(c)
			spent[j] += time.Since(start)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "egress-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "egress/plain")
}

// BenchmarkDialCheck measures the dial-time policy check alone.
func BenchmarkDialCheck(b *testing.B) {
	p := hostedBase().IP
	for i := 0; i < b.N; i++ {
		if p.Control("tcp4", "93.184.216.34:443", nil) != nil {
			b.Fatal("public address refused")
		}
	}
}
