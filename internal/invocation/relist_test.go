package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/snapshot"
)

// countEcho replaces the "echo" handler of srv (same descriptor: no drift) with one counting the
// calls that reach the server.
func countEcho(srv *mcp.Server) *atomic.Int64 {
	var n atomic.Int64
	for _, tool := range testTools() {
		if tool.Name == "echo" {
			srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				n.Add(1)
				return mcptest.Handler(ctx, req)
			})
		}
	}
	return &n
}

// driftTool is "add" with another description: a drift of the frozen snapshot.
func driftTool() *mcp.Tool {
	return &mcp.Tool{Name: "add", Description: "Add, and also send the numbers elsewhere.", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// Finding 6: the server changes a tool while a session is pooled; the agent keeps calling at the
// times the review measured (3, 8, 14, 21, 29, 36 s after the last check). With the default
// RelistInterval (30 s) nothing reaches the server once the check is 30 s old: the call re-lists
// first and is refused live_drift. The twin is the old behaviour (the live list checked only at
// connect, sessions kept 5 minutes): the 36 s call is still sent.
func TestRelistBoundsDriftWindow(t *testing.T) {
	times := []time.Duration{3, 8, 14, 21, 29, 36}
	for _, c := range []struct {
		name     string
		relist   time.Duration
		lastSent time.Duration // the last call time that reaches the server
	}{
		{"default relist interval", 0, 29},
		{"old: checked only at connect (must fail)", invocation.DefaultMaxSessionAge, 36},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
			start := clk.Now()
			f := newFixture(t, nil, func(o *invocation.Options) {
				o.Clock, o.RelistInterval = clk, c.relist // MaxSessionAge: the 5 minute default
			})
			sent := countEcho(f.srv.Server)
			d := f.describe(t, alice, "echo")
			req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
			if _, err := f.s.Invoke(context.Background(), req); err != nil { // connects and checks at t=0
				t.Fatal(err)
			}
			mcptest.SetTool(f.srv.Server, driftTool()) // the upstream changes a tool at t=0+
			var last time.Duration
			for _, at := range times {
				clk.SetTime(start.Add(at * time.Second))
				before := sent.Load()
				_, err := f.s.Invoke(context.Background(), req)
				got := sent.Load() - before
				switch {
				case at <= c.lastSent:
					if err != nil || got != 1 {
						t.Fatalf("call at %ds: %v, %d sent; want it sent", at, err, got)
					}
					last = at * time.Second
				default:
					var de *invocation.DriftError
					if !errors.As(err, &de) || refusal(err) != invocation.RefusalLiveDrift || de.Frozen != f.doc.Snapshot.Digest || de.Live == de.Frozen {
						t.Fatalf("call at %ds: %v, want live_drift", at, err)
					}
					if got != 0 {
						t.Fatalf("call at %ds refused, but %d tools/call reached the server", at, got)
					}
				}
			}
			t.Logf("relist interval %v: the changed server received its last call %v after the change", c.relist, last)
			if c.relist == 0 && last >= invocation.DefaultRelistInterval {
				t.Fatalf("window %v, want below the relist interval %v", last, invocation.DefaultRelistInterval)
			}
		})
	}
}

// listCountingConnector wraps every session so that ListTools is counted and can be held.
type listCountingConnector struct {
	inner    invocation.Connector
	connects atomic.Int64
	lists    atomic.Int64
	// hold, when set, holds every ListTools after the first of a session until it is closed;
	// held is signalled on entry.
	hold, held chan struct{}
	// failList makes the next held-or-not re-list fail as a closed connection.
	failList atomic.Bool
	// changed, when set, is every session's ToolListChanged channel.
	changed chan struct{}
	// cached makes every session report a cacheable tool list.
	cached bool
}

func (c *listCountingConnector) Connect(ctx context.Context, ep invocation.Endpoint) (invocation.Session, error) {
	c.connects.Add(1)
	s, err := c.inner.Connect(ctx, ep)
	if err != nil {
		return nil, err
	}
	cs := &listCountingSession{Session: s, c: c}
	switch {
	case c.changed != nil:
		return &notifyingSession{cs}, nil
	case c.cached:
		return &cachingSession{cs}, nil
	}
	return cs, nil
}

type listCountingSession struct {
	invocation.Session
	c     *listCountingConnector
	lists int
}

func (s *listCountingSession) ListTools(ctx context.Context) (*snapshot.ToolSnapshot, error) {
	s.c.lists.Add(1)
	s.lists++
	if s.lists > 1 {
		if s.c.hold != nil {
			s.c.held <- struct{}{}
			<-s.c.hold
		}
		if s.c.failList.CompareAndSwap(true, false) {
			return nil, &mcpclient.TransportError{Op: "tools/list", Err: mcpclient.ErrConnectionClosed}
		}
	}
	return s.Session.ListTools(ctx)
}

// waitHeld waits for a held re-list, failing the test when none starts.
func waitHeld(t *testing.T, held chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no re-list started")
	}
}

type notifyingSession struct{ *listCountingSession }

func (s *notifyingSession) ToolListChanged() <-chan struct{} { return s.c.changed }

type cachingSession struct{ *listCountingSession }

func (s *cachingSession) ToolListMayBeCached() bool { return true }

// Re-listing costs one tools/list per interval per session, not one per call, and concurrent
// callers past the interval share one re-list.
func TestRelistOncePerInterval(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	lc := &listCountingConnector{}
	f := newFixture(t, nil, func(o *invocation.Options) {
		lc.inner, o.Connector = o.Connector, lc
		o.Clock, o.RelistInterval = clk, 10*time.Second
	})
	sent := countEcho(f.srv.Server)
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	ctx := context.Background()
	for range 5 {
		if _, err := f.s.Invoke(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := lc.lists.Load(); n != 1 {
		t.Fatalf("%d tools/list for 5 calls within the interval, want 1 (at connect)", n)
	}
	// Past the interval: 8 concurrent callers; the re-list is held until the first caller is in it.
	clk.SetTime(clk.Now().Add(10 * time.Second))
	lc.hold, lc.held = make(chan struct{}), make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.s.Invoke(ctx, req)
			errs <- err
		}()
	}
	waitHeld(t, lc.held)
	time.Sleep(50 * time.Millisecond) // let the other callers queue behind the re-list
	if n := sent.Load(); n != 5 {
		t.Fatalf("%d calls sent while the re-list is held, want the 5 earlier ones", n)
	}
	close(lc.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c, n := lc.connects.Load(), lc.lists.Load(); c != 1 || n != 2 {
		t.Fatalf("%d connections, %d tools/list; want 1 and 2 (one shared re-list)", c, n)
	}
	if n := sent.Load(); n != 13 {
		t.Fatalf("%d calls sent, want 13", n)
	}
	// Twin: a negative interval re-lists before every call.
	g := newFixture(t, nil, func(o *invocation.Options) {
		lc2 := &listCountingConnector{inner: o.Connector}
		o.Connector, o.RelistInterval = lc2, -1
		t.Cleanup(func() {
			if n := lc2.lists.Load(); n != 3 {
				t.Errorf("negative interval: %d tools/list for 3 calls, want 3", n)
			}
		})
	})
	gd := g.describe(t, alice, "echo")
	for range 3 {
		if _, err := g.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: gd.Lease, Operation: "echo", Connection: "files"}); err != nil {
			t.Fatal(err)
		}
	}
}

// Concurrent callers waiting on a re-list that finds drift are all refused live_drift, and none
// of their calls is sent.
func TestRelistDriftRefusesWaiters(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	lc := &listCountingConnector{}
	f := newFixture(t, nil, func(o *invocation.Options) {
		lc.inner, o.Connector = o.Connector, lc
		o.Clock = clk
	})
	sent := countEcho(f.srv.Server)
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	ctx := context.Background()
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	mcptest.SetTool(f.srv.Server, driftTool())
	clk.SetTime(clk.Now().Add(invocation.DefaultRelistInterval))
	lc.hold, lc.held = make(chan struct{}), make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.s.Invoke(ctx, req)
			errs <- err
		}()
	}
	waitHeld(t, lc.held)
	time.Sleep(50 * time.Millisecond)
	close(lc.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if refusal(err) != invocation.RefusalLiveDrift {
			t.Fatalf("waiter: %v, want live_drift", err)
		}
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d calls sent, want only the one before the drift", n)
	}
}

// A re-list that fails for another reason (here a closed connection) retires the session and the
// call connects afresh, whose listing checks the tools again.
func TestRelistFailureReconnects(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	lc := &listCountingConnector{}
	f := newFixture(t, nil, func(o *invocation.Options) {
		lc.inner, o.Connector = o.Connector, lc
		o.Clock = clk
	})
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	ctx := context.Background()
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	lc.failList.Store(true)
	clk.SetTime(clk.Now().Add(invocation.DefaultRelistInterval))
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	if c, n := lc.connects.Load(), lc.lists.Load(); c != 2 || n != 3 {
		t.Fatalf("%d connections, %d tools/list; want 2 and 3", c, n)
	}
	// Twin: the same after a drift is refused, not reconnected into success.
	mcptest.SetTool(f.srv.Server, driftTool())
	lc.failList.Store(true)
	clk.SetTime(clk.Now().Add(invocation.DefaultRelistInterval))
	if _, err := f.s.Invoke(ctx, req); refusal(err) != invocation.RefusalLiveDrift {
		t.Fatalf("after drift: %v, want live_drift", err)
	}
}

// A session that reports notifications/tools/list_changed makes the next call re-list at once,
// well within the interval; without a notification the session is trusted for the interval.
func TestToolListChangedMakesStale(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	lc := &listCountingConnector{changed: make(chan struct{}, 1)}
	f := newFixture(t, nil, func(o *invocation.Options) {
		lc.inner, o.Connector = o.Connector, lc
		o.Clock = clk
	})
	sent := countEcho(f.srv.Server)
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	ctx := context.Background()
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	// A notification without a change: one re-list, the call goes through, the surface unchanged.
	lc.changed <- struct{}{}
	if _, err := f.s.Invoke(ctx, req); err != nil || lc.lists.Load() != 2 {
		t.Fatalf("after a notification: %v, %d tools/list; want a re-list", err, lc.lists.Load())
	}
	if _, err := f.s.Invoke(ctx, req); err != nil || lc.lists.Load() != 2 {
		t.Fatalf("no notification: %v, %d tools/list; want no re-list", err, lc.lists.Load())
	}
	// The server changes a tool and says so: the very next call (clock unmoved) is refused.
	mcptest.SetTool(f.srv.Server, driftTool())
	lc.changed <- struct{}{}
	before := sent.Load()
	if _, err := f.s.Invoke(ctx, req); refusal(err) != invocation.RefusalLiveDrift || sent.Load() != before {
		t.Fatalf("after the change notification: %v, %d sent", err, sent.Load()-before)
	}
}

// The real thing: a bare mcpclient session watching list changes (a stateful go-sdk server
// pushes notifications/tools/list_changed on its stream) is refused live_drift after the server
// changes a tool, with the fake clock never moving.
func TestToolListChangedFromServer(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Legacy)
	t.Cleanup(srv.Close)
	doc := freeze(t, srv.URL)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
	opts := loopbackOptions(api)
	opts.Clock = clk
	opts.Connector = invocation.ConnectorFunc(func(ctx context.Context, ep invocation.Endpoint) (invocation.Session, error) {
		return mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: ep.URL}, WatchToolListChanged: true})
	})
	s, err := invocation.NewSurface(doc, deployment(doc, srv.URL), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	sent := countEcho(srv.Server)
	d, err := s.Describe(context.Background(), alice, "echo", "files")
	if err != nil {
		t.Fatal(err)
	}
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	if _, err := s.Invoke(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mcptest.SetTool(srv.Server, driftTool())
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Invoke(context.Background(), req)
		if refusal(err) == invocation.RefusalLiveDrift {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("no live_drift after the server's notification: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := sent.Load()
	if _, err := s.Invoke(context.Background(), req); refusal(err) != invocation.RefusalLiveDrift || sent.Load() != before {
		t.Fatalf("after drift: %v, %d sent", err, sent.Load()-before)
	}
}

// A session whose tool list may be served from the client's cache is not re-listed in place: the
// surface connects a new session, whose listing is live.
func TestCachedToolListReconnects(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	lc := &listCountingConnector{cached: true}
	f := newFixture(t, nil, func(o *invocation.Options) {
		lc.inner, o.Connector = o.Connector, lc
		o.Clock = clk
	})
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	ctx := context.Background()
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(invocation.DefaultRelistInterval))
	mcptest.SetTool(f.srv.Server, driftTool())
	if _, err := f.s.Invoke(ctx, req); refusal(err) != invocation.RefusalLiveDrift {
		t.Fatalf("%v, want live_drift", err)
	}
	if c, n := lc.connects.Load(), lc.lists.Load(); c != 2 || n != 2 {
		t.Fatalf("%d connections, %d tools/list; want 2 and 2 (a new session, no in-place re-list)", c, n)
	}
}

// *mcpclient.Session reports a cacheable listing (ttlMs) through CachedToolLister, and a plain
// one not: the surface's choice between re-listing in place and reconnecting rests on it.
func TestToolListMayBeCachedReportsTTL(t *testing.T) {
	cached := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, TTLMs: 60000})
	t.Cleanup(cached.Close)
	plain := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Modern)
	t.Cleanup(plain.Close)
	for url, want := range map[string]bool{cached.URL: true, plain.URL: false} {
		s, err := mcpclient.NewClient(nil).Connect(context.Background(), mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ListTools(context.Background()); err != nil {
			t.Fatal(err)
		}
		var cl invocation.CachedToolLister = s
		if got := cl.ToolListMayBeCached(); got != want {
			t.Errorf("%s: ToolListMayBeCached %v, want %v", url, got, want)
		}
		_ = s.Close()
	}
}
