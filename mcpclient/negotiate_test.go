package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

func stdio(flags ...string) ServerConfig {
	return ServerConfig{Stdio: &StdioServer{Argv: mcptest.StdioArgv(flags...)}}
}

func TestNegotiation(t *testing.T) {
	modernHTTP := mcptest.StartHTTP(mcptest.NewServer("modern", mcptest.DefaultTools()), mcptest.Modern)
	defer modernHTTP.Close()
	legacyHTTP := mcptest.StartHTTP(mcptest.NewServer("legacy", mcptest.DefaultTools()), mcptest.Legacy)
	defer legacyHTTP.Close()

	cases := []struct {
		name string
		cfg  ServerConfig
		want Era
	}{
		{"stdio answers discover", stdio(), EraModern},
		{"stdio legacy-only", stdio("--era", "legacy"), EraLegacy},
		{"stdio ignores discover", stdio("--discover", "ignore"), EraLegacy},
		{"stdio exits on discover", stdio("--discover", "exit"), EraLegacy},
		{"raw stdio legacy (method not found)", stdio("--raw", "--era", "legacy"), EraLegacy},
		{"http modern stateless", ServerConfig{HTTP: &HTTPServer{URL: modernHTTP.URL}}, EraModern},
		{"http legacy stateful", ServerConfig{HTTP: &HTTPServer{URL: legacyHTTP.URL}}, EraLegacy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Limits.ProbeTimeout = 2 * time.Second
			cl := NewClient(nil)
			ctx := context.Background()
			s, err := cl.Connect(ctx, c.cfg)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer s.Close()
			if s.Era() != c.want || s.ProtocolVersion() != string(c.want) {
				t.Fatalf("era = %s (%s), want %s", s.Era(), s.ProtocolVersion(), c.want)
			}
			if s.ServerInfo().Name == "" {
				t.Errorf("no server info")
			}
			snap, err := s.ListTools(ctx)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(snap.Tools) == 0 || snap.ProtocolVersion != string(c.want) {
				t.Fatalf("snapshot = %+v", snap)
			}
			if era, ok := cl.CachedEra(c.cfg); !ok || era != c.want {
				t.Fatalf("cached era = %s %v", era, ok)
			}
			// Second connect uses the cached era (no probe) and yields the same digest.
			s2, err := cl.Connect(ctx, c.cfg)
			if err != nil {
				t.Fatalf("second Connect: %v", err)
			}
			defer s2.Close()
			snap2, err := s2.ListTools(ctx)
			if err != nil {
				t.Fatalf("second ListTools: %v", err)
			}
			if snap2.Digest != snap.Digest {
				t.Fatalf("digest changed across connections: %s vs %s", snap.Digest, snap2.Digest)
			}
		})
	}
}

func TestUnsupportedProtocolRefused(t *testing.T) {
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: mcptest.HostileFutureOnly})
	t.Cleanup(srv.Close)
	for name, cfg := range map[string]ServerConfig{
		"http":  {HTTP: &HTTPServer{URL: srv.URL}},
		"stdio": stdio("--hostile", mcptest.HostileFutureOnly),
	} {
		_, err := NewClient(nil).Connect(context.Background(), cfg)
		if refusal.Name(err) != "unsupported_protocol_version" || !errors.Is(err, ErrUnsupportedProtocol) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// switchHandler lets a test replace the server behind one URL.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

func TestEraCacheFollowsServer(t *testing.T) {
	sw := &switchHandler{}
	sw.set(mcptest.HTTPHandler(mcptest.NewServer("m", mcptest.DefaultTools()), mcptest.Modern))
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	cfg := ServerConfig{HTTP: &HTTPServer{URL: ts.URL + "/mcp"}}
	cl := NewClient(nil)
	s, err := cl.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if era, _ := cl.CachedEra(cfg); era != EraModern {
		t.Fatalf("cached %s", era)
	}
	// The server is replaced by a legacy-only one: the cached modern attempt falls back, and the
	// cache follows.
	sw.set(mcptest.HTTPHandler(mcptest.NewServer("l", mcptest.DefaultTools()), mcptest.Legacy))
	s, err = cl.Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if era, _ := cl.CachedEra(cfg); era != EraLegacy || s.Era() != EraLegacy {
		t.Fatalf("cached %s, session %s", era, s.Era())
	}
	// A failing connect forgets the era.
	sw.set(http.NotFoundHandler())
	if _, err := cl.Connect(context.Background(), cfg); err == nil {
		t.Fatal("connect to a 404 endpoint succeeded")
	}
	if _, ok := cl.CachedEra(cfg); ok {
		t.Fatal("era still cached after a failed connect")
	}
}
