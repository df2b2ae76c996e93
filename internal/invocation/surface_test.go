package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestDescribeAndInvoke(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	d := f.describe(t, alice, "add")
	if d.Operation != "add" || d.Connection != "files" || d.Service != "files" || d.Title != "Reviewed add" ||
		d.Effect != "read" || d.Snapshot != f.doc.Snapshot.Digest || len(d.Lease) != 64 {
		t.Fatalf("description = %+v", d)
	}
	if !strings.Contains(string(d.InputSchema), `"a":{"type":"number"}`) {
		t.Fatalf("input schema is not the frozen one: %s", d.InputSchema)
	}
	res, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files",
		Arguments: json.RawMessage(`{"a":2,"b":40}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Snapshot != f.doc.Snapshot.Digest || !strings.Contains(string(res.JSON), `"text":"42"`) {
		t.Fatalf("result = %+v %s", res, res.JSON)
	}
	// The review the apiserver saw: the caller's identity, verb invoke on this deployment.
	rv := f.api.reviews[len(f.api.reviews)-1]
	ra := rv.ResourceAttributes
	if rv.User != alice.User || rv.UID != alice.UID || len(rv.Groups) != 1 || ra.Verb != "invoke" ||
		ra.Group != "connectors.b10x.io" || ra.Resource != "servicedeployments" || ra.Name != testName || ra.Namespace != testNamespace {
		t.Fatalf("review = %+v", rv)
	}
	if got := f.s.Operations(); strings.Join(got, ",") != "add,echo,fail,read_file,transfer" {
		t.Fatalf("operations = %v", got)
	}
}

// The result is kept exactly as the server sent it: unknown members and content types included.
func TestResultIsLossless(t *testing.T) {
	raw := &mcptest.Raw{Era: mcptest.Modern, Hostile: mcptest.HostileUnknownContent,
		Tools: []json.RawMessage{json.RawMessage(`{"name":"get","inputSchema":{"type":"object"}}`)}}
	srv := mcptest.StartRawHTTP(raw)
	t.Cleanup(srv.Close)
	f := &fixture{api: &fakeAPIServer{allow: map[string]bool{alice.User: true}}}
	f.doc = freeze(t, srv.URL)
	f.dep = deployment(f.doc, srv.URL)
	s, err := invocation.NewSurface(f.doc, f.dep, loopbackOptions(f.api))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.s = s
	d := f.describe(t, alice, "get")
	res, err := s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "get", Connection: "files"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(res.JSON, &got); err != nil {
		t.Fatal(err)
	}
	content, _ := got["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %s", res.JSON)
	}
	if c0, _ := content[0].(map[string]any); c0["type"] == "text" {
		t.Fatalf("the unknown content type was rewritten: %s", res.JSON)
	}
}

func TestStaleLeaseAfterSnapshotChange(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	old := f.describe(t, alice, "echo")
	call := func(s *invocation.Surface, lease string) error {
		_, err := s.Invoke(ctx, invocation.Request{Caller: alice, Lease: lease, Operation: "echo", Connection: "files",
			Arguments: json.RawMessage(`{"text":"hi"}`)})
		return err
	}
	if err := call(f.s, old.Lease); err != nil {
		t.Fatalf("before the change: %v", err)
	}
	// The server changes a tool; the operator re-freezes and activates a new reviewed profile.
	mcptest.SetTool(f.srv.Server, &mcp.Tool{Name: "echo", Description: "Echo, now different.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)})
	doc2 := freeze(t, f.srv.URL)
	if doc2.Snapshot.Digest == f.doc.Snapshot.Digest {
		t.Fatal("the snapshot did not change")
	}
	dep2 := deployment(doc2, f.srv.URL)
	s2, err := invocation.NewSurface(doc2, dep2, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	err = call(s2, old.Lease)
	if !errors.Is(err, invocation.ErrStaleLease) || refusal(err) != "stale_lease" {
		t.Fatalf("old lease on the new snapshot: %v", err)
	}
	// Twin: a lease described on the new snapshot is accepted.
	if err := call(s2, f.describe2(t, s2, alice, "echo").Lease); err != nil {
		t.Fatalf("new lease: %v", err)
	}
	// The old surface, reconnecting, finds the live server no longer matching its frozen
	// snapshot and calls nothing.
	_ = f.s.Close()
	err = call(f.s, old.Lease)
	var de *invocation.DriftError
	if !errors.As(err, &de) || refusal(err) != "live_drift" || de.Frozen != f.doc.Snapshot.Digest || de.Live != doc2.Snapshot.Digest {
		t.Fatalf("old surface after the change: %v", err)
	}
}

func (f *fixture) describe2(t testing.TB, s *invocation.Surface, caller invocation.Caller, op string) *invocation.Description {
	t.Helper()
	d, err := s.Describe(context.Background(), caller, op, "files")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLeaseBinding(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	echo := f.describe(t, alice, "echo")
	otherSeed := alice
	otherSeed.Seed = "serviceaccount:u-9"
	cases := []struct {
		name   string
		caller invocation.Caller
		lease  string
		op     string
		want   string
	}{
		{"issued lease", alice, echo.Lease, "echo", ""},
		{"other caller seed", otherSeed, echo.Lease, "echo", "stale_lease"},
		{"other operation", alice, echo.Lease, "add", "stale_lease"},
		{"no lease", alice, "", "echo", "stale_lease"},
		{"truncated lease", alice, echo.Lease[:63], "echo", "stale_lease"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.s.Invoke(ctx, invocation.Request{Caller: c.caller, Lease: c.lease, Operation: c.op, Connection: "files"})
			if got := refusal(err); got != c.want || (c.want == "" && err != nil) {
				t.Fatalf("refusal = %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

func TestWrongConnection(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	_, err := f.s.Describe(ctx, alice, "echo", "files-staging")
	if !errors.Is(err, invocation.ErrWrongConnection) || refusal(err) != "wrong_connection" {
		t.Fatalf("describe: %v", err)
	}
	_, err = f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files-staging"})
	if !errors.Is(err, invocation.ErrWrongConnection) {
		t.Fatalf("invoke: %v", err)
	}
	// Twin: the surface's own Connection.
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}); err != nil {
		t.Fatal(err)
	}
}

func TestNotExposed(t *testing.T) {
	f := newFixture(t, []string{"read_file"}, nil)
	ctx := context.Background()
	for _, op := range []string{"read_file", "nope", "READ_FILE"} {
		_, err := f.s.Describe(ctx, alice, op, "files")
		if !errors.Is(err, invocation.ErrNotExposed) || refusal(err) != "not_exposed" {
			t.Fatalf("describe %s: %v", op, err)
		}
		// A lease computed by hand for the hidden operation does not open it either.
		lease := f.lease(t, alice.Seed, op)
		_, err = f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: lease, Operation: op, Connection: "files"})
		if !errors.Is(err, invocation.ErrNotExposed) {
			t.Fatalf("invoke %s: %v", op, err)
		}
	}
	// Twin: the same deployment with read_file exposed.
	g := newFixture(t, nil, nil)
	d := g.describe(t, alice, "read_file")
	if _, err := g.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "read_file", Connection: "files"}); err != nil {
		t.Fatal(err)
	}
}

func TestForbidden(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	_, err := f.s.Describe(ctx, mallory, "echo", "files")
	if !errors.Is(err, invocation.ErrForbidden) || refusal(err) != "forbidden" {
		t.Fatalf("describe: %v", err)
	}
	if strings.Contains(err.Error(), "prose") {
		t.Fatalf("the apiserver's reason surfaced: %v", err)
	}
	lease := f.lease(t, mallory.Seed, "echo")
	_, err = f.s.Invoke(ctx, invocation.Request{Caller: mallory, Lease: lease, Operation: "echo", Connection: "files"})
	if !errors.Is(err, invocation.ErrForbidden) {
		t.Fatalf("invoke: %v", err)
	}
	// Twin: alice is bound to a role allowing invoke.
	d := f.describe(t, alice, "echo")
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}); err != nil {
		t.Fatal(err)
	}
	// Authorization is decided on every call: revoking the grant refuses the next call with the
	// same, still valid lease.
	f.api.mu.Lock()
	delete(f.api.allow, alice.User)
	f.api.mu.Unlock()
	_, err = f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
	if !errors.Is(err, invocation.ErrForbidden) {
		t.Fatalf("after revocation: %v", err)
	}
	// An apiserver that cannot answer fails closed.
	f.api.mu.Lock()
	f.api.allow[alice.User] = true
	f.api.fail = errors.New("connection refused")
	f.api.mu.Unlock()
	_, err = f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
	var ae *invocation.AuthorizationError
	if !errors.As(err, &ae) || !errors.Is(err, invocation.ErrAuthorizationUnavailable) {
		t.Fatalf("apiserver down: %v", err)
	}
}

func TestInvalidCaller(t *testing.T) {
	f := newFixture(t, nil, nil)
	for _, c := range []invocation.Caller{{User: alice.User}, {Seed: "s"}, {User: alice.User, Seed: "\xff"}} {
		_, err := f.s.Describe(context.Background(), c, "echo", "files")
		if !errors.Is(err, invocation.ErrInvalidCaller) || refusal(err) != "invalid_caller" {
			t.Fatalf("caller %+v: %v", c, err)
		}
	}
	if n := f.api.count(); n != 0 {
		t.Fatalf("%d reviews for invalid callers", n)
	}
}

func TestArgumentsValidated(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	d := f.describe(t, alice, "transfer")
	invoke := func(args string) error {
		_, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files",
			Arguments: json.RawMessage(args)})
		return err
	}
	cases := []struct {
		args, pointer, keyword string
	}{
		{`{"amount":0,"to":"bob-secret-value"}`, "/amount", "minimum"},
		{`{"amount":"5","to":"bob"}`, "/amount", "type"},
		{`{"amount":5}`, "", "required"},
		{`{"amount":5,"to":"bob","extra":true}`, "", "additionalProperties"},
		{`{"amount":5,"to":"` + strings.Repeat("x", 40) + `"}`, "/to", "maxLength"},
		{`{"amount":5,"to":"bob","amount":6}`, "", ""}, // duplicate key
		{`[1,2]`, "", ""},
		{`{"amount":5,"to":"bob"} {}`, "", ""}, // trailing data
		{`{"amount":5,"to":"\xff"}`, "", ""},   // invalid UTF-8
	}
	for _, c := range cases {
		err := invoke(c.args)
		var ia *invocation.InvalidArgumentsError
		if !errors.As(err, &ia) || !errors.Is(err, invocation.ErrInvalidArguments) || refusal(err) != "invalid_arguments" {
			t.Fatalf("%s: %v", c.args, err)
		}
		if ia.Pointer != c.pointer || ia.Keyword != c.keyword {
			t.Fatalf("%s: pointer %q keyword %q, want %q %q", c.args, ia.Pointer, ia.Keyword, c.pointer, c.keyword)
		}
		if strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "bob") {
			t.Fatalf("the argument value is echoed: %v", err)
		}
	}
	// Twin: valid arguments reach the server and come back.
	if err := invoke(`{"amount":5,"to":"bob"}`); err != nil {
		t.Fatal(err)
	}
}

func TestArgumentBound(t *testing.T) {
	f := newFixture(t, nil, func(o *invocation.Options) { o.MaxArgumentBytes = 256 })
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	args := func(n int) json.RawMessage {
		return json.RawMessage(`{"text":"` + strings.Repeat("a", n-len(`{"text":""}`)) + `"}`)
	}
	_, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files", Arguments: args(257)})
	if !errors.Is(err, invocation.ErrArgumentTooLarge) || refusal(err) != "argument_too_large" {
		t.Fatalf("257 bytes: %v", err)
	}
	// Twin: exactly at the bound.
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files", Arguments: args(256)}); err != nil {
		t.Fatalf("256 bytes: %v", err)
	}
}

func TestToolError(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	d := f.describe(t, alice, "fail")
	_, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "fail", Connection: "files"})
	var te *invocation.ToolError
	if !errors.As(err, &te) || !errors.Is(err, invocation.ErrToolError) || refusal(err) != "tool_error" {
		t.Fatalf("fail: %v", err)
	}
	if !strings.Contains(string(te.Result), `"isError":true`) || !strings.Contains(string(te.Result), "failed as asked") {
		t.Fatalf("the result JSON is not carried: %s", te.Result)
	}
	if strings.Contains(err.Error(), "failed as asked") {
		t.Fatalf("server prose in the error: %v", err)
	}
	// Twin: a tool that succeeds.
	d = f.describe(t, alice, "echo")
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}); err != nil {
		t.Fatal(err)
	}
}

func TestResultBound(t *testing.T) {
	// The echo tool answers with its arguments as text: 600 bytes of arguments make a result
	// over 600 bytes.
	args := json.RawMessage(`{"text":"` + strings.Repeat("r", 600) + `"}`)
	for _, c := range []struct {
		max  int
		want string
	}{{512, "result_too_large"}, {4096, ""}} {
		t.Run(fmt.Sprint(c.max), func(t *testing.T) {
			f := newFixture(t, nil, func(o *invocation.Options) { o.MaxResultBytes = c.max })
			d := f.describe(t, alice, "echo")
			res, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files", Arguments: args})
			if got := refusal(err); got != c.want {
				t.Fatalf("refusal %q (%v), want %q", got, err, c.want)
			}
			if c.want != "" && !errors.Is(err, invocation.ErrResultTooLarge) {
				t.Fatalf("not ErrResultTooLarge: %v", err)
			}
			if c.want == "" && len(res.JSON) <= 600 {
				t.Fatalf("result %d bytes", len(res.JSON))
			}
		})
	}
}

func TestSurfaceRefusedUnlessActive(t *testing.T) {
	f := newFixture(t, nil, nil)
	other := "sha256:" + strings.Repeat("0", 64)
	cases := []struct {
		name   string
		mutate func(d *apiv1.ServiceDeployment)
	}{
		{"other active snapshot", func(d *apiv1.ServiceDeployment) { d.Status.ActiveSnapshotDigest = other }},
		{"no active snapshot (drift, fail closed)", func(d *apiv1.ServiceDeployment) { d.Status.ActiveSnapshotDigest = "" }},
		{"spec not yet activated", func(d *apiv1.ServiceDeployment) { d.Generation = 2 }},
		{"not ready", func(d *apiv1.ServiceDeployment) { d.Status.Conditions[0].Status = "False" }},
		{"no profile digest", func(d *apiv1.ServiceDeployment) { d.Status.ProfileDigest = "" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dep := f.dep.DeepCopy()
			c.mutate(dep)
			_, err := invocation.NewSurface(f.doc, dep, f.opts)
			if !errors.Is(err, invocation.ErrNotActive) || refusal(err) != "not_active" {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// A tampered document (descriptor changed, digests kept) is refused before anything else.
	doc := f.doc.DeepCopy()
	doc.Snapshot.Tools[0].Descriptor.Raw = []byte(`{"name":"add","inputSchema":{"type":"object"}}`)
	if _, err := invocation.NewSurface(doc, f.dep, f.opts); !errors.Is(err, invocation.ErrInvalidSurface) {
		t.Fatalf("tampered document: %v", err)
	}
	// Another reviewed profile over the same snapshot (other titles, say) is not what the
	// deployment activated.
	other2 := f.doc.DeepCopy()
	other2.Operations[0].Title = "Something else"
	if _, err := invocation.NewSurface(other2, f.dep, f.opts); !errors.Is(err, invocation.ErrNotActive) {
		t.Fatalf("another profile over the same snapshot: %v", err)
	}
	// Twin: the activated deployment as is.
	if _, err := invocation.NewSurface(f.doc, f.dep, f.opts); err != nil {
		t.Fatal(err)
	}
}

// Arguments nested beyond what a JSON decoder accepts are refused as invalid_arguments before
// anything is sent; reasonable nesting goes through.
func TestDeeplyNestedArguments(t *testing.T) {
	f := newFixture(t, nil, nil)
	d := f.describe(t, alice, "add") // its schema allows additional members
	nested := func(n int) json.RawMessage {
		return json.RawMessage(`{"a":1,"b":2,"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	_, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files", Arguments: nested(20_000)})
	if !errors.Is(err, invocation.ErrInvalidArguments) {
		t.Fatalf("20000 levels: %v", err)
	}
	if _, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files", Arguments: nested(50)}); err != nil {
		t.Fatalf("50 levels: %v", err)
	}
}

func TestList(t *testing.T) {
	tools := append(testTools(), &mcp.Tool{Name: "remote", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`)})
	f := newFixtureWith(t, tools, []string{"read_file"}, nil)
	ctx := context.Background()
	before := f.api.count()
	list, err := f.s.List(ctx, alice, "files")
	if err != nil {
		t.Fatal(err)
	}
	if n := f.api.count() - before; n != 1 {
		t.Fatalf("%d reviews for one list", n)
	}
	var refs []string
	for _, d := range list {
		refs = append(refs, d.Operation)
		if one := f.describe(t, alice, d.Operation); one.Lease != d.Lease || string(one.InputSchema) != string(d.InputSchema) || one.Title != d.Title {
			t.Fatalf("listed %+v, described %+v", d, one)
		}
	}
	// Hidden read_file and the uncompilable remote are not listed.
	if got := strings.Join(refs, ","); got != "add,echo,fail,transfer" {
		t.Fatalf("listed %s", got)
	}
	// Twins: another caller, another Connection.
	if _, err := f.s.List(ctx, mallory, "files"); !errors.Is(err, invocation.ErrForbidden) {
		t.Fatalf("mallory: %v", err)
	}
	if _, err := f.s.List(ctx, alice, "other"); !errors.Is(err, invocation.ErrWrongConnection) {
		t.Fatalf("other connection: %v", err)
	}
}
