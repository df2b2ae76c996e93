package egress

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkExchangeOverhead measures one small JSON POST exchange on loopback through the
// egress port (Transport.HTTPClient, as handed to go-sdk) and through a plain http.Client, in
// alternation, and reports both costs, their ratio (egress/plain) and the median of the paired
// per-iteration ratios (egress/plain-median).
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
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var pair [2]time.Duration
		for j, c := range clients {
			start := time.Now()
			do(c)
			pair[j] = time.Since(start)
			spent[j] += pair[j]
		}
		ratios = append(ratios, float64(pair[1])/float64(pair[0]))
	}
	b.StopTimer()
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "egress-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "egress/plain")
	// The median of the paired per-iteration ratios: a load spike on a shared machine hits one
	// pair, not the estimate.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "egress/plain-median")
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
