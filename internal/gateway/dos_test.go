package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// --- finding 3: search_operations costs O(deployments in scope) -------------------------------

// countingAuthz counts the decisions asked of it (the SubjectAccessReviews a real one would
// make) and allows the agent in team-a only.
type countingAuthz struct{ n atomic.Int64 }

func (c *countingAuthz) Authorize(_ context.Context, caller invocation.Caller, t invocation.Target) (bool, error) {
	c.n.Add(1)
	return caller.User == "system:serviceaccount:team-a:agent" && t.Namespace == testNS, nil
}

// searchWorld serves inTeam deployments in team-a and others spread over other namespaces (100
// per namespace), all of one reviewed profile, behind a CachingAuthorizer over a countingAuthz.
func searchWorld(t testing.TB, inTeam, others int, mod func(*Config)) (*world, *countingAuthz) {
	t.Helper()
	sar := &countingAuthz{}
	w := newWorld(t, mcptest.Modern, func(c *Config) {
		c.Authorizer = &CachingAuthorizer{Next: sar}
		if mod != nil {
			mod(c)
		}
	})
	w.reg.Surface.Authorizer = w.gw.cfg.Authorizer
	w.reg.Remove(keyOf(testNS, testName))
	opts := w.reg.surfaceOptions()
	add := func(ns, name string) {
		dep := activeDeployment(w.doc, w.up.URL)
		dep.Namespace, dep.Name = ns, name
		s, err := invocation.NewSurface(w.doc, dep, opts)
		if err != nil {
			t.Fatal(err)
		}
		w.reg.put(types.NamespacedName{Namespace: ns, Name: name}, s, "k")
	}
	for i := range inTeam {
		add(testNS, fmt.Sprintf("files-%03d", i))
	}
	for i := range others {
		add(fmt.Sprintf("other-%03d", i/100), fmt.Sprintf("dep-%03d", i%100))
	}
	return w, sar
}

func searchCall(t testing.TB, cs *mcp.ClientSession, args map[string]any) SearchResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolSearchOperations, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("search_operations %v = %+v, %v", args, res, err)
	}
	var out SearchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearchOperationsCostsTheNamespace: with 1,000 deployments served in other namespaces, a
// search of team-a asks for exactly team-a's 3 decisions and records one audit event, not one per
// deployment. The twin: a search without the filter checks far more deployments (up to the
// bound, then says partial), so the count above could fail.
func TestSearchOperationsCostsTheNamespace(t *testing.T) {
	w, sar := searchWorld(t, 3, 1000, func(c *Config) { c.MaxSearchReviews = 50 })
	cs := mustConnect(t, w.url+"/mcp", goodTok, "")
	before := len(w.audits.all())
	got := searchCall(t, cs, map[string]any{"namespace": testNS, "query": "echo"})
	if n := sar.n.Load(); n != 3 {
		t.Fatalf("a search of team-a made %d authorization decisions, want 3 (one per team-a deployment)", n)
	}
	if len(got.Operations) != 3 || got.Partial || got.Truncated {
		t.Fatalf("search of team-a = %+v", got)
	}
	for _, op := range got.Operations {
		if op.Namespace != testNS || op.Operation != "echo" {
			t.Fatalf("hit outside the filter: %+v", op)
		}
	}
	evs := w.audits.all()[before:]
	if len(evs) != 1 || evs[0].Action != "search" || evs[0].Target.Namespace != testNS || evs[0].User == "" || evs[0].Outcome != "ok" {
		t.Fatalf("audit events of one search = %+v, want one \"search\" event", evs)
	}

	// The twin: without the filter, every namespace is in scope; the bound stops the search and
	// the answer says so.
	sar.n.Store(0)
	before = len(w.audits.all())
	all := searchCall(t, cs, map[string]any{"query": "echo"})
	if n := sar.n.Load(); n != 50 { // other-000's deployments sort first
		t.Fatalf("an unfiltered search made %d decisions, want the bound (50)", n)
	}
	if !all.Partial {
		t.Fatalf("a search stopped at the bound does not say partial: %+v", all)
	}
	if evs := w.audits.all()[before:]; len(evs) != 1 || evs[0].Action != "search" {
		t.Fatalf("audit events of an unfiltered search = %d, want 1", len(evs))
	}
	// The bound holds within one namespace too (other-003 serves 100), and nothing of a
	// namespace the agent may not see is shown.
	sar.n.Store(0)
	if one := searchCall(t, cs, map[string]any{"namespace": "other-003"}); !one.Partial || len(one.Operations) != 0 || sar.n.Load() != 50 {
		t.Fatalf("search of other-003 = %+v after %d decisions", one, sar.n.Load())
	}
}

// TestCachingAuthorizerEvictsLRU: a full decision cache evicts its least recently used entry and
// keeps the recent ones (the clear-all it replaced forgot every decision at once and fails this).
func TestCachingAuthorizerEvictsLRU(t *testing.T) {
	sar := &countingAuthz{}
	a := &CachingAuthorizer{Next: sar, MaxEntries: 4}
	ctx := context.Background()
	c := invocation.Caller{User: "system:serviceaccount:team-a:agent", Seed: "s"}
	tgt := func(i int) invocation.Target { return invocation.Target{Namespace: testNS, Name: fmt.Sprint(i)} }
	for i := range 4 {
		_, _ = a.Authorize(ctx, c, tgt(i))
	}
	_, _ = a.Authorize(ctx, c, tgt(0)) // 0 is now the most recently used; 1 the least
	_, _ = a.Authorize(ctx, c, tgt(4)) // full: evicts 1
	if n := sar.n.Load(); n != 5 {
		t.Fatalf("decisions = %d, want 5", n)
	}
	for _, i := range []int{0, 2, 3, 4} {
		_, _ = a.Authorize(ctx, c, tgt(i))
	}
	if n := sar.n.Load(); n != 5 {
		t.Fatalf("decisions = %d after asking the recent entries again: a full cache lost recent decisions", n)
	}
	// The twin: the least recently used one is gone (the bound holds).
	_, _ = a.Authorize(ctx, c, tgt(1))
	if n := sar.n.Load(); n != 6 {
		t.Fatalf("decisions = %d: the least recently used entry was not evicted", n)
	}
}

// TestTokenCacheEvictsLRU: the same for the token cache.
func TestTokenCacheEvictsLRU(t *testing.T) {
	api := &reviewAPI{tokens: map[string][]string{}}
	for i := range 5 {
		api.tokens[fmt.Sprintf("tok-%d", i)] = []string{DefaultAudience}
	}
	a := &TokenAuthenticator{Client: api.client(), MaxCacheEntries: 4}
	ctx := context.Background()
	auth := func(i int) {
		t.Helper()
		if _, err := a.Authenticate(ctx, fmt.Sprintf("tok-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 0, 4} { // 4 evicts 1, the least recently used
		auth(i)
	}
	for _, i := range []int{0, 2, 3, 4} {
		auth(i)
	}
	if api.reviews != 5 {
		t.Fatalf("reviews = %d, want 5: a full token cache lost recent entries", api.reviews)
	}
	auth(1)
	if api.reviews != 6 {
		t.Fatalf("reviews = %d: the least recently used token was not evicted", api.reviews)
	}
}

// --- finding 8: meta-tool arguments are decoded strictly -----------------------------------------

// TestMetaArgumentsStrict: case variants, duplicated members and unknown members of meta-tool
// arguments are refused invalid_params (encoding/json bound "Operation" to operation and let the
// last duplicate win); the twin: the exact document is served.
func TestMetaArgumentsStrict(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	call := func(tool, args string) string {
		t.Helper()
		_, body := post(t, w.url+"/mcp", goodTok, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
		return body
	}
	for name, c := range map[string]struct{ tool, args string }{
		"case variant":          {ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","Operation":"echo"}`},
		"case variant twice":    {ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","operation":"transfer","Operation":"echo"}`},
		"duplicate":             {ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","operation":"transfer","operation":"echo"}`},
		"unknown member":        {ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","operation":"echo","extra":1}`},
		"lease on describe":     {ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","operation":"echo","lease":"x"}`},
		"search case variant":   {ToolSearchOperations, `{"Query":"echo"}`},
		"search duplicate":      {ToolSearchOperations, `{"query":"echo","query":"transfer"}`},
		"search deployment":     {ToolSearchOperations, `{"deployment":"files"}`},
		"nested duplicate":      {ToolInvokeOperation, `{"namespace":"team-a","deployment":"files","operation":"echo","lease":"x","arguments":{"text":"a","text":"b"}}`},
		"not an object":         {ToolSearchOperations, `["query"]`},
		"wrong type":            {ToolSearchOperations, `{"query":7}`},
		"invoke unknown member": {ToolInvokeOperation, `{"namespace":"team-a","deployment":"files","operation":"echo","lease":"x","Arguments":{}}`},
	} {
		if body := call(c.tool, c.args); !strings.Contains(body, `"refused: `+RefusalInvalidParams+`"`) {
			t.Errorf("%s: %s, want invalid_params", name, body)
		}
	}
	// The twins: the exact documents are served.
	if body := call(ToolDescribeOperation, `{"namespace":"team-a","deployment":"files","operation":"echo"}`); !strings.Contains(body, `"operation":"echo"`) || strings.Contains(body, "refused") {
		t.Fatalf("exact describe_operation: %s", body)
	}
	if body := call(ToolSearchOperations, `{"query":"transfer","namespace":"team-a"}`); !strings.Contains(body, `"operation":"transfer"`) || strings.Contains(body, "refused") {
		t.Fatalf("exact search_operations: %s", body)
	}
}

// --- finding 4: a stalled body holds no slot ---------------------------------------------------

// saAuthn authenticates staticAuthn's tokens and "sa-<n>" as ServiceAccount n.
type saAuthn struct{ staticAuthn }

func (a *saAuthn) Authenticate(ctx context.Context, token string) (invocation.Caller, error) {
	if n, ok := strings.CutPrefix(token, "sa-"); ok {
		return invocation.Caller{User: "system:serviceaccount:team-s:sa-" + n, UID: "uid-sa-" + n, Seed: "uid:uid-sa-" + n}, nil
	}
	return a.staticAuthn.Authenticate(ctx, token)
}

// stall opens n loopback TCP connections to the gateway, each sending the headers of a
// tools/call from its own ServiceAccount and a part of the body, then nothing more.
func stall(t *testing.T, base string, n int) []net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		var d net.Dialer
		c, err := d.DialContext(context.Background(), "tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		req := "POST /mcp/team-a/files HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer sa-" + fmt.Sprint(i) +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n" +
			"Content-Length: 4096\r\n\r\n" + `{"jsonrpc":"2.0","id":1,`
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}

func waitBodyReads(t *testing.T, g *Gateway, n int64) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return g.bodyReads.Load() == n, nil }); err != nil {
		t.Fatalf("%d request bodies being read, want %d", g.bodyReads.Load(), n)
	}
}

// TestSlowlorisDoesNotStopOthers: 32 ServiceAccounts send headers and part of a body, then stall,
// against a gateway of 32 global slots; an unrelated caller's call is still served, because a body
// is read before any slot is taken. The twin runs the pre-fix ordering (body read after the
// slots, behind a test seam): the same stall makes the unrelated caller's request overloaded.
func TestSlowlorisDoesNotStopOthers(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "body-first", true: "old-ordering"}[old], func(t *testing.T) {
			w := newWorld(t, mcptest.Modern, func(c *Config) {
				c.Authenticator = &saAuthn{}
				c.MaxInflight, c.MaxInflightPerCaller = 32, 1
				c.BodyReadTimeout = 5 * time.Minute // the stall outlasts the test: no timeout helps
			})
			w.gw.bodyAfterSlots.Store(old)
			stall(t, w.url, 32)
			waitBodyReads(t, w.gw, 32)
			resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody)
			if !old {
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"echo"`) {
					t.Fatalf("unrelated caller during the stall: %d %s", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "refused: "+RefusalOverloaded) {
				t.Fatalf("old ordering: unrelated caller got %d %s, want overloaded (the stall holds every slot)", resp.StatusCode, body)
			}
		})
	}
}

// TestStalledBodyTimesOut: a body that does not arrive within the body read timeout is answered
// 408 request_body_timeout and holds nothing afterwards; the twin: a call whose body arrived runs
// longer than that timeout and still succeeds (the deadline ends with the read: it does not
// cancel the call).
func TestStalledBodyTimesOut(t *testing.T) {
	w := newWorld(t, mcptest.Modern, func(c *Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	conns := stall(t, w.url, 1)
	_ = conns[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conns[0]), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b[:n]), "refused: "+RefusalRequestBodyTimeout) {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, b[:n])
	}
	waitBodyReads(t, w.gw, 0)

	done := slowCall(t, w, goodTok)
	time.Sleep(1 * time.Second) // well past the body read timeout
	close(w.up.release)
	if err := <-done; err != nil {
		t.Fatalf("a call running past the body read timeout failed: %v", err)
	}
}

// --- item 9: failed TokenReviews are limited per source ------------------------------------------

// countingReviews answers TokenReviews for good only, counting them (safe for concurrent use).
type countingReviews struct {
	good string
	n    atomic.Int64
}

func (c *countingReviews) client() client.Client {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			tr := obj.(*authenticationv1.TokenReview)
			c.n.Add(1)
			if tr.Spec.Token != c.good {
				tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
				return nil
			}
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:agent", UID: "uid-1"}}
			return nil
		},
	}).Build()
}

// TestFailedTokenReviewsLimitedPerSource: 200 distinct bogus tokens from one source, sent at
// once, cause at most the burst of TokenReviews; the rest are refused authentication_rate_limited
// with a retry time, without a TokenReview. A valid caller from another source still gets
// through; the flooded source's bucket refills with time.
func TestFailedTokenReviewsLimitedPerSource(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	api := &countingReviews{good: "valid-token"}
	a := &TokenAuthenticator{Client: api.client(), FailureBurst: 5, FailureRate: 1, Clock: clk}
	flood := WithSource(context.Background(), "10.0.0.66")
	var limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			_, err := a.Authenticate(flood, fmt.Sprintf("bogus-%d", i))
			var ae *AuthError
			if !errors.As(err, &ae) {
				t.Errorf("bogus token: %v", err)
				return
			}
			if errors.Is(err, ErrAuthRateLimited) {
				if ae.Refusal() != RefusalAuthRateLimited || ae.RetryAfter <= 0 {
					t.Errorf("rate-limited refusal = %q, retry %v", ae.Refusal(), ae.RetryAfter)
				}
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	if n := api.n.Load(); n != 5 {
		t.Fatalf("200 bogus tokens from one source caused %d TokenReviews, want the burst (5)", n)
	}
	if limited.Load() != 195 {
		t.Fatalf("%d refused authentication_rate_limited, want 195", limited.Load())
	}
	// The twin: a valid caller from another source is reviewed and authenticated.
	if c, err := a.Authenticate(WithSource(context.Background(), "10.0.0.7"), "valid-token"); err != nil || c.User == "" {
		t.Fatalf("valid caller from another source: %v", err)
	}
	if n := api.n.Load(); n != 6 {
		t.Fatalf("reviews = %d, want 6", n)
	}
	// Its cached token is answered from the flooded source too (no TokenReview needed).
	if _, err := a.Authenticate(flood, "valid-token"); err != nil {
		t.Fatalf("cached valid token from the flooded source: %v", err)
	}
	// One second later the flooded source has one more try.
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := a.Authenticate(flood, "bogus-new"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after the refill: %v, want unauthenticated (reviewed)", err)
	}
	if _, err := a.Authenticate(flood, "bogus-newer"); !errors.Is(err, ErrAuthRateLimited) {
		t.Fatalf("after the refill was spent: %v, want authentication_rate_limited", err)
	}
	if n := api.n.Load(); n != 7 {
		t.Fatalf("reviews = %d, want 7", n)
	}
}

// TestRateLimitedAuthIs429: over HTTP, a source that spent its failures is answered 429
// authentication_rate_limited with Retry-After, and the token does not reach the apiserver; a
// valid caller from another loopback source (127.0.0.2) is served meanwhile.
func TestRateLimitedAuthIs429(t *testing.T) {
	api := &countingReviews{good: goodTok}
	w := newWorld(t, mcptest.Modern, func(c *Config) {
		c.Authenticator = &TokenAuthenticator{Client: api.client(), FailureBurst: 3, FailureRate: 0.001}
	})
	for i := range 3 {
		if resp, _ := post(t, w.url+"/mcp/team-a/files", fmt.Sprintf("bogus-%d", i), "", pingBody); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bogus token %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := post(t, w.url+"/mcp/team-a/files", "bogus-next", "", pingBody)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "refused: "+RefusalAuthRateLimited) || strings.Contains(body, "bogus") {
		t.Fatalf("flooded source: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if n := api.n.Load(); n != 3 {
		t.Fatalf("TokenReviews = %d, want 3 (the burst)", n)
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, w.url+"/mcp/team-a/files", strings.NewReader(pingBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+goodTok)
	r2, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("valid caller from 127.0.0.2: %d", r2.StatusCode)
	}
}

// TestFloodedSourceTakesNoSlot: a source over its failure budget, and a token remembered as
// refused, are refused before the request takes a slot: with the only slot held by a running
// call they still get 429 authentication_rate_limited and 401 unauthenticated, without a
// TokenReview. The twin: a request that passes the precheck (the agent's cached token) needs the
// slot and is refused overloaded.
func TestFloodedSourceTakesNoSlot(t *testing.T) {
	api := &countingReviews{good: goodTok}
	w := newWorld(t, mcptest.Modern, func(c *Config) {
		c.Authenticator = &TokenAuthenticator{Client: api.client(), FailureBurst: 2, FailureRate: 0.001}
		c.MaxInflight = 1
	})
	if resp, _ := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("agent: %d", resp.StatusCode)
	}
	for i := range 2 {
		if resp, _ := post(t, w.url+"/mcp/team-a/files", fmt.Sprintf("bogus-%d", i), "", pingBody); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bogus token %d: %d", i, resp.StatusCode)
		}
	}
	done := slowCall(t, w, goodTok)
	if resp, body := post(t, w.url+"/mcp/team-a/files", "bogus-2", "", pingBody); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "refused: "+RefusalAuthRateLimited) {
		t.Fatalf("flooded source while the slot is held: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, w.url+"/mcp/team-a/files", "bogus-0", "", pingBody); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a token remembered as refused while the slot is held: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "refused: "+RefusalOverloaded) {
		t.Fatalf("a request that needs the held slot: %d %s", resp.StatusCode, body)
	}
	if n := api.n.Load(); n != 3 {
		t.Fatalf("TokenReviews = %d, want 3 (the agent once, the burst of 2)", n)
	}
	close(w.up.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
