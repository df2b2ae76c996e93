package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

const (
	testNS   = "team-a"
	testName = "files"
	goodTok  = "token-of-agent"
	otherTok = "token-of-stranger"
)

// testTools are mcptest's defaults plus "transfer", whose schema is strict, with annotations and
// prose the gateway must never repeat.
func testTools() []*mcp.Tool {
	tools := mcptest.DefaultTools()
	for _, t := range tools {
		t.Annotations = &mcp.ToolAnnotations{Title: "SERVER-TITLE", ReadOnlyHint: false, IdempotentHint: true}
	}
	return append(tools, &mcp.Tool{
		Name:        "transfer",
		Description: "SERVER-PROSE: transfer an amount.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1},"to":{"type":"string","maxLength":32}},"required":["amount","to"],"additionalProperties":false}`),
	})
}

// upstream is a real go-sdk MCP server on loopback. Its "slow" tool signals entered and waits
// for release.
type upstream struct {
	srv *mcp.Server
	*mcptest.HTTPServer
	entered, release chan struct{}
}

func startUpstream(t testing.TB, era mcptest.Era) *upstream {
	t.Helper()
	srv := mcptest.NewServer("upstream", testTools())
	u := &upstream{srv: srv, entered: make(chan struct{}, 16), release: make(chan struct{})}
	srv.AddTool(&mcp.Tool{Name: "slow", Description: "Wait.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.entered <- struct{}{}
			select {
			case <-u.release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	u.HTTPServer = mcptest.StartHTTP(srv, era)
	t.Cleanup(u.Close)
	return u
}

// reviewed freezes url and drafts a reviewed profile (reviewed titles, "read" effects except
// transfer "write" and delete-ish "destructive").
func reviewed(t testing.TB, url string) *apiv1.ProfileDocument {
	t.Helper()
	ctx := context.Background()
	s, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(snap)
	doc.Service.Ref, doc.Service.ConnectionRef = "files", "files"
	for i := range doc.Operations {
		op := &doc.Operations[i]
		op.Effect, op.Title, op.Description = apiv1.EffectRead, "Reviewed "+op.RemoteName, "Reviewed description of "+op.RemoteName
		if op.RemoteName == "transfer" {
			op.Effect = apiv1.EffectWrite
		}
	}
	if err := ocipack.Validate(doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// activeDeployment binds doc at url, exposing every operation except hidden, activated.
func activeDeployment(doc *apiv1.ProfileDocument, url string, hidden ...string) *apiv1.ServiceDeployment {
	dep := &apiv1.ServiceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, Generation: 1},
		Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: "files"}, ProviderID: "files",
			MCPConnection: apiv1.MCPConnection{URL: url}},
	}
	for _, o := range doc.Operations {
		expose := true
		for _, h := range hidden {
			expose = expose && h != o.OperationRef
		}
		dep.Spec.Operations = append(dep.Spec.Operations, apiv1.OperationBinding{OperationRef: o.OperationRef,
			EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{"g"}, Expose: expose})
	}
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		panic(err)
	}
	dep.Status = apiv1.ServiceDeploymentStatus{ObservedGeneration: 1, ActiveSnapshotDigest: doc.Snapshot.Digest, ProfileDigest: pd,
		LastFrozenTime: ptr.To(metav1.Now()),
		Conditions:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Activated", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}}
	return dep
}

// staticAuthn authenticates goodTok as the agent and otherTok as a stranger.
type staticAuthn struct{ calls atomic.Int64 }

func (a *staticAuthn) Authenticate(_ context.Context, token string) (invocation.Caller, error) {
	a.calls.Add(1)
	switch token {
	case goodTok:
		return invocation.Caller{User: "system:serviceaccount:team-a:agent", UID: "uid-agent", Seed: "uid:uid-agent"}, nil
	case otherTok:
		return invocation.Caller{User: "system:serviceaccount:team-b:stranger", UID: "uid-stranger", Seed: "uid:uid-stranger"}, nil
	}
	return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
}

// agentOnly allows the agent on team-a/files only.
var agentOnly = invocation.AuthorizerFunc(func(_ context.Context, c invocation.Caller, t invocation.Target) (bool, error) {
	return c.User == "system:serviceaccount:team-a:agent" && t.Namespace == testNS && t.Name == testName, nil
})

// world is a gateway serving one deployment of a real upstream.
type world struct {
	up     *upstream
	doc    *apiv1.ProfileDocument
	reg    *Registry
	gw     *Gateway
	url    string
	audits auditLog
}

type auditLog struct {
	mu sync.Mutex
	ev []invocation.AuditEvent
}

func (a *auditLog) add(_ context.Context, e invocation.AuditEvent) {
	a.mu.Lock()
	a.ev = append(a.ev, e)
	a.mu.Unlock()
}

func (a *auditLog) all() []invocation.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]invocation.AuditEvent(nil), a.ev...)
}

func newWorld(t testing.TB, era mcptest.Era, mod func(*Config), hidden ...string) *world {
	t.Helper()
	return newWorldOn(t, startUpstream(t, era), mod, hidden...)
}

// newWorldOn is newWorld against upstream up.
func newWorldOn(t testing.TB, up *upstream, mod func(*Config), hidden ...string) *world {
	t.Helper()
	w := &world{up: up}
	w.doc = reviewed(t, w.up.URL)
	authz := &CachingAuthorizer{Next: agentOnly}
	w.reg = &Registry{Surface: invocation.Options{
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: authz, Audit: func(ctx context.Context, e invocation.AuditEvent) {
			w.audits.add(ctx, e)
			NoteSurfaceEvent(ctx, e)
		},
		MaxArgumentBytes: 4096, MaxResultBytes: 64 << 10,
	}, Log: logr.Discard()}
	s, err := invocation.NewSurface(w.doc, activeDeployment(w.doc, w.up.URL, hidden...), w.reg.surfaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	w.reg.put(types.NamespacedName{Namespace: testNS, Name: testName}, s, "k")
	cfg := Config{Registry: w.reg, Authenticator: &staticAuthn{}, Authorizer: authz, Log: logr.Discard(), MaxInflightPerCaller: 128}
	if mod != nil {
		mod(&cfg)
	}
	if tt, ok := t.(*testing.T); ok {
		cfg.Log = testr.NewWithOptions(tt, testr.Options{Verbosity: 2})
	}
	w.gw, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(w.gw.Handler())
	t.Cleanup(ts.Close)
	w.url = ts.URL
	t.Cleanup(w.reg.Close)
	return w
}

// bearerRT adds a bearer token to every request.
type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// connect opens a go-sdk client session to url with token in the given era ("" = negotiate
// 2026-07-28 first; "2025-11-25" = legacy initialize).
func connect(t testing.TB, url, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{token, http.DefaultTransport}}, DisableStandaloneSSE: true}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(context.Background(), tr, opts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mustConnect(t testing.TB, url, token, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := connect(t, url, token, version)
	if err != nil {
		t.Fatalf("connect %s (%q): %v", url, version, err)
	}
	return cs
}
