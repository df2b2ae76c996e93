package mcpclient

import (
	"context"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// The era cache is a bounded LRU: with room for one server configuration, connecting to a second
// forgets the first, whose next Connect negotiates again and still gets the right era.
func TestEraCacheIsBounded(t *testing.T) {
	modern := mcptest.StartHTTP(mcptest.NewServer("m", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(modern.Close)
	legacy := mcptest.StartHTTP(mcptest.NewServer("l", mcptest.DefaultTools()), mcptest.Legacy)
	t.Cleanup(legacy.Close)
	mcfg := ServerConfig{HTTP: &HTTPServer{URL: modern.URL}}
	lcfg := ServerConfig{HTTP: &HTTPServer{URL: legacy.URL}}
	connect := func(cl *Client, cfg ServerConfig) Era {
		t.Helper()
		s, err := cl.Connect(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Era()
	}

	cl := NewClient(&Options{MaxCachedEras: 1})
	if era := connect(cl, mcfg); era != EraModern {
		t.Fatalf("modern server: %s", era)
	}
	if era := connect(cl, lcfg); era != EraLegacy {
		t.Fatalf("legacy server: %s", era)
	}
	if _, ok := cl.CachedEra(mcfg); ok {
		t.Fatal("the first configuration's era survived past the bound")
	}
	if era, ok := cl.CachedEra(lcfg); !ok || era != EraLegacy {
		t.Fatalf("cached %s %v", era, ok)
	}
	// Correct after the eviction: negotiated again.
	if era := connect(cl, mcfg); era != EraModern {
		t.Fatalf("modern server after eviction: %s", era)
	}
	if era, ok := cl.CachedEra(mcfg); !ok || era != EraModern {
		t.Fatalf("cached %s %v", era, ok)
	}

	// Twin: the default bound keeps both.
	both := NewClient(nil)
	connect(both, mcfg)
	connect(both, lcfg)
	if _, ok := both.CachedEra(mcfg); !ok {
		t.Fatal("default bound evicted the first of two configurations")
	}
	if both.eras.Size() != defaultMaxCachedEras {
		t.Fatalf("default size %d", both.eras.Size())
	}
}
