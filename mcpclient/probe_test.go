package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

// methodLog records the JSON-RPC methods an HTTP server received, and lets a test answer
// server/discover itself before the real (go-sdk) handler sees anything else.
type methodLog struct {
	next     http.Handler
	discover func(w http.ResponseWriter, n int) bool // answered the n-th discover (from 1)?
	hang     bool                                    // the first discover gets no answer until the client gives up

	mu      sync.Mutex
	methods []string
	nDisc   int
}

func (l *methodLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		l.mu.Lock()
		l.methods = append(l.methods, m.Method)
		if m.Method == methodDiscover {
			l.nDisc++
		}
		n := l.nDisc
		l.mu.Unlock()
		if m.Method == methodDiscover && n == 1 && l.hang {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		if m.Method == methodDiscover && l.discover != nil && l.discover(w, n) {
			return
		}
	}
	l.next.ServeHTTP(w, r)
}

func (l *methodLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.methods
	l.methods = nil
	return m
}

func contains(ms []string, m string) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// refuseFirst is a loopback listener whose first accepted connection is reset at once, as if
// the server were not up yet; later connections are served.
type refuseFirst struct {
	net.Listener
	once sync.Once
}

func (l *refuseFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		first := false
		l.once.Do(func() { first = true })
		if !first {
			return c, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
}

func legacyHandler() http.Handler {
	return mcptest.HTTPHandler(mcptest.NewServer("legacy", mcptest.DefaultTools()), mcptest.Legacy)
}

func modernHandler() http.Handler {
	return mcptest.HTTPHandler(mcptest.NewServer("modern", mcptest.DefaultTools()), mcptest.Modern)
}

func errorPage(status int) func(http.ResponseWriter, int) bool {
	return func(w http.ResponseWriter, _ int) bool {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<html><body>upstream unavailable</body></html>")
		return true
	}
}

// TestHTTPProbeTransportFailureIsNoVerdict: over HTTP, a server/discover exchange that gets no
// recognised answer fails Connect with a transport error; the SDK's fallback initialize never
// reaches the server and no era is cached, even when the server is a legacy one that would have
// answered initialize. The next Connect, with the server answering, negotiates correctly.
func TestHTTPProbeTransportFailureIsNoVerdict(t *testing.T) {
	cases := []struct {
		name     string
		discover func(http.ResponseWriter, int) bool
		refuse   bool // the first connection is reset
		hang     bool // the first discover is never answered
		status   int  // expected TransportError status (0: no HTTP answer)
		refusal  string
		reason   error
	}{
		{name: "connection reset, then legacy server up", refuse: true, reason: ErrExchangeFailed},
		{name: "503 error page", discover: errorPage(503), status: 503, reason: ErrHTTPStatus},
		{name: "502 error page", discover: errorPage(502), status: 502, reason: ErrHTTPStatus},
		{name: "429 error page", discover: errorPage(429), status: 429, reason: ErrHTTPStatus},
		{name: "body cut short", discover: func(w http.ResponseWriter, _ int) bool {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "4096")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"res`)
			return true
		}, reason: ErrExchangeFailed},
		{name: "probe deadline", hang: true, refusal: "probe_timeout", reason: ErrProbeTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The transport failure happens once; afterwards the legacy server answers normally.
			log := &methodLog{next: legacyHandler(), hang: c.hang}
			if c.discover != nil {
				d := c.discover
				log.discover = func(w http.ResponseWriter, n int) bool { return n == 1 && d(w, n) }
			}
			ts := httptest.NewUnstartedServer(log)
			if c.refuse {
				ts.Listener = &refuseFirst{Listener: ts.Listener}
			}
			ts.Start()
			t.Cleanup(ts.Close)
			cfg := ServerConfig{HTTP: &HTTPServer{URL: ts.URL + "/mcp"}}
			cfg.Limits.ProbeTimeout = 300 * time.Millisecond
			cl := NewClient(nil)

			s, err := cl.Connect(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Connect succeeded (era %s) after a probe transport failure", s.Era())
			}
			if !errors.Is(err, c.reason) {
				t.Fatalf("err = %v, want %v", err, c.reason)
			}
			if c.refusal != "" {
				if refusal.Name(err) != c.refusal {
					t.Fatalf("err = %v, want refusal %s", err, c.refusal)
				}
			} else {
				var te *TransportError
				if !errors.As(err, &te) || te.Status != c.status || te.Op != "connect" {
					t.Fatalf("err = %#v, want a connect TransportError with status %d", err, c.status)
				}
			}
			if era, ok := cl.CachedEra(cfg); ok {
				t.Fatalf("era %s cached after a transport failure", era)
			}
			if got := log.take(); contains(got, "initialize") {
				t.Fatalf("the failed probe fell back to initialize: %v", got)
			}

			cfg.Limits.ProbeTimeout = 10 * time.Second
			s, err = cl.Connect(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Connect with the server up: %v", err)
			}
			defer s.Close()
			if s.Era() != EraLegacy {
				t.Fatalf("era %s, want %s", s.Era(), EraLegacy)
			}
			if era, _ := cl.CachedEra(cfg); era != EraLegacy {
				t.Fatalf("cached %s", era)
			}
		})
	}
}

// TestHTTPProbeRecognisedAnswers: recognised answers to server/discover are verdicts. A legacy
// go-sdk stateful server (400, -32022 listing 2025-11-25 only), a 404 or 405 without a modern
// error body fall back to initialize; -32022 listing 2026-07-28 means modern.
func TestHTTPProbeRecognisedAnswers(t *testing.T) {
	cases := []struct {
		name     string
		next     http.Handler
		discover func(http.ResponseWriter, int) bool
		want     Era
	}{
		{name: "go-sdk legacy stateful", next: legacyHandler(), want: EraLegacy},
		{name: "404", next: legacyHandler(), discover: func(w http.ResponseWriter, _ int) bool {
			http.NotFound(w, nil)
			return true
		}, want: EraLegacy},
		{name: "405", next: legacyHandler(), discover: func(w http.ResponseWriter, _ int) bool {
			w.Header().Set("Allow", "GET")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return true
		}, want: EraLegacy},
		{name: "method not found", next: legacyHandler(), discover: func(w http.ResponseWriter, _ int) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`)
			return true
		}, want: EraLegacy},
		{name: "-32022 with supported 2026-07-28", next: modernHandler(), discover: func(w http.ResponseWriter, n int) bool {
			if n > 1 {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"]}}}`)
			return true
		}, want: EraModern},
		{name: "go-sdk modern stateless", next: modernHandler(), want: EraModern},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := &methodLog{next: c.next, discover: c.discover}
			ts := httptest.NewServer(log)
			t.Cleanup(ts.Close)
			cfg := ServerConfig{HTTP: &HTTPServer{URL: ts.URL + "/mcp"}}
			cfg.Limits.ProbeTimeout = 5 * time.Second
			cl := NewClient(nil)
			s, err := cl.Connect(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer s.Close()
			if s.Era() != c.want {
				t.Fatalf("era %s, want %s", s.Era(), c.want)
			}
			if era, _ := cl.CachedEra(cfg); era != c.want {
				t.Fatalf("cached %s", era)
			}
			got := log.take()
			if !contains(got, methodDiscover) || contains(got, "initialize") != (c.want == EraLegacy) {
				t.Fatalf("methods %v", got)
			}
		})
	}
}
