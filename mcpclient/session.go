package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/snapshot"
)

// WarnInvalidToolHeaders is the snapshot warning code for a tool whose x-mcp-header annotations
// are invalid (SEP-2243): it is recorded as evidence but CallTool refuses it.
const WarnInvalidToolHeaders = RefusalInvalidToolHeaders

// Session is one connection to a server, tools only. It is safe for concurrent use. Close it when
// done; for stdio servers Close ends the process.
type Session struct {
	cfg ServerConfig
	lim Limits
	reg *registry
	cs  *mcp.ClientSession

	proc   *process
	era    Era
	proto  string
	server snapshot.ServerInfo

	listChanged chan struct{}

	// The direct tools/call path (direct.go), HTTP only.
	hc     *http.Client    // the bounded client the SDK transport uses; nil: SDK path only
	meta   json.RawMessage // the per-request _meta the SDK injects (2026-07-28)
	seq    atomic.Uint64   // the direct path's request ids
	broken atomic.Bool     // a direct exchange ended in what fails the SDK's connection

	mu       sync.Mutex
	last     *snapshot.ToolSnapshot
	excluded map[string]bool   // tools the SDK cannot call (invalid x-mcp-header annotations)
	pages    map[string][]byte // raw tools/list results by cursor, for pages the SDK serves from its TTL cache
	noDirect bool              // the SDK path only from now on (the SDK does not know the session id in use)
	// sdkCaches: the SDK may answer tools/list from its TTL cache; sdkToolsCleared: the SDK's
	// tool cache may not match last (it received notifications/tools/list_changed, or a listing
	// is under way or failed), until a ListTools succeeds.
	sdkCaches, sdkToolsCleared bool
}

// Era returns the negotiated era.
func (s *Session) Era() Era { return s.era }

// ProtocolVersion returns the negotiated protocol revision, e.g. "2026-07-28".
func (s *Session) ProtocolVersion() string { return s.proto }

// ServerInfo returns the server identity reported during negotiation (evidence only).
func (s *Session) ServerInfo() snapshot.ServerInfo { return s.server }

// ToolListChanged delivers a value (coalesced) whenever the server sends
// notifications/tools/list_changed. It only fires when ServerConfig.WatchToolListChanged is set.
// A notification never changes an existing snapshot: call ListTools for a new one.
func (s *Session) ToolListChanged() <-chan struct{} { return s.listChanged }

// ToolListMayBeCached reports whether the server marked the last tool list of this session
// cacheable (ttlMs, SEP-2549): go-sdk may then answer a later ListTools on this session from its
// cache until the hint expires, so a caller that must see the live list now opens a new session.
func (s *Session) ToolListMayBeCached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sdkCaches
}

// Stderr returns the captured beginning of a stdio server's stderr (at most Limits.MaxStderrBytes)
// and the number of bytes dropped. After Close it is final: Close waits until the exited server's
// stderr has been read to its end. It is server output: never put it in errors or status.
func (s *Session) Stderr() ([]byte, int64) {
	if s.proc == nil {
		return nil, 0
	}
	return s.proc.stderr.bytes()
}

// Close ends the session (for HTTP, the SDK deletes a legacy session; for stdio the process is
// stopped: stdin closed, then its process group killed after a short grace period).
func (s *Session) Close() error {
	var err error
	if s.cs != nil {
		err = s.cs.Close()
	}
	if s.proc != nil {
		s.proc.Close()
	}
	if err != nil {
		return &TransportError{Op: "close", Err: ErrConnectionClosed}
	}
	return nil
}

func (s *Session) onToolListChanged(context.Context, *mcp.ToolListChangedRequest) {
	s.mu.Lock()
	clear(s.pages)
	s.mu.Unlock()
	select {
	case s.listChanged <- struct{}{}:
	default:
	}
}

// serverRequestFeature names the feature behind a server-to-client request. The name is always
// one of this package's constants, never text the server chose: a request of an unknown family is
// RefusalServerRequest.
func serverRequestFeature(method string) string {
	family, _, _ := strings.Cut(method, "/")
	switch family {
	case "sampling":
		return RefusalSampling
	case "elicitation":
		return RefusalElicitation
	case "roots":
		return RefusalRoots
	case "tasks":
		return RefusalTasks
	}
	return RefusalServerRequest
}

// refuseServerRequests answers every server-to-client request except ping with a JSON-RPC error
// naming the refused feature, and ends the in-flight requests with the same named refusal. The
// session stays usable.
func (s *Session) refuseServerRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "ping" || strings.HasPrefix(method, "notifications/") {
			if method == "notifications/tools/list_changed" {
				s.mu.Lock()
				s.sdkToolsCleared = true
				s.mu.Unlock()
			}
			return next(ctx, method, req)
		}
		feature := serverRequestFeature(method)
		s.reg.cancelInflight(&FeatureRefusedError{Feature: feature})
		return nil, &jsonrpc.Error{Code: -32601, Message: "refused: " + feature}
	}
}

// begin prepares one bounded request: a context with the call deadline (paused while an
// authorization runs, see timedAuthorizer), cancellable with a refusal cause, carrying the callState the transports fill in.
func (s *Session) begin(ctx context.Context, op string) (context.Context, *callState, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	tctx, clock, stop := withClock(cctx, s.lim.CallTimeout,
		refuse(RefusalCallTimeout, op, s.lim.CallTimeout.Milliseconds(), ErrCallTimeout))
	st := &callState{op: op, cancel: cancel, clock: clock}
	s.reg.track(st)
	return context.WithValue(tctx, callKey{}, st), st, func() {
		s.reg.untrack(st)
		stop()
		cancel(nil)
	}
}

// exchange runs fn (one SDK request) under ctx and returns the raw result recorded below the SDK.
// served reports the SDK answered without a request (its TTL cache).
//
// scanned reports that raw is part of a frame that already passed the strict scan (snapshot.Members
// or snapshot.Validate of the whole frame: the HTTP transport); a stdio frame has only been
// checked by encoding/json. page is the split of a tools/list result made when it was recorded
// (nil when there is none).
func (s *Session) exchange(ctx context.Context, op string, st *callState, fn func(context.Context) error) (raw json.RawMessage, page *listPage, scanned, served bool, err error) {
	if f := s.reg.sessionFault(); f != nil {
		return nil, nil, false, false, s.outcomeErr(op, ctx, nil, f)
	}
	if s.broken.Load() {
		// A direct exchange failed what would have been the SDK's connection.
		return nil, nil, false, false, s.outcomeErr(op, ctx, nil, errSDKConnFailed)
	}
	// A fresh state per request, sharing the operation's cancel function.
	req := &callState{op: op, cancel: st.cancel, clock: st.clock}
	s.reg.track(req)
	defer s.reg.untrack(req)
	rctx := context.WithValue(ctx, callKey{}, req)
	sdkErr := fn(rctx)
	if cause := context.Cause(rctx); cause != nil {
		var fr *FeatureRefusedError
		var r *RefusalError
		if errors.As(cause, &fr) || errors.As(cause, &r) {
			return nil, nil, false, false, s.outcomeErr(op, rctx, req, cause)
		}
	}
	req.mu.Lock()
	got, result, page, rpcErr, scanned := req.got, req.result, req.page, req.rpcErr, req.scanned
	req.mu.Unlock()
	if got && !rpcErr {
		return result, page, scanned, false, nil
	}
	if sdkErr == nil && !got {
		return nil, nil, false, true, nil
	}
	if sdkErr == nil {
		sdkErr = errors.New("error response")
	}
	return nil, nil, false, false, s.outcomeErr(op, rctx, req, sdkErr)
}

// ListTools lists every tool (all pages, within the bounds) and freezes the listing into a new
// immutable snapshot of the raw descriptors as received.
func (s *Session) ListTools(ctx context.Context) (*snapshot.ToolSnapshot, error) {
	const op = opListTools
	// Until this listing completes, the SDK's tool cache (from which it derives the x-mcp-header
	// headers) may hold pages of it that s.last does not: calls take the SDK path meanwhile.
	s.mu.Lock()
	s.sdkToolsCleared = true
	s.mu.Unlock()
	ctx, st, done := s.begin(ctx, op)
	defer done()
	var descs []json.RawMessage
	seen := map[string]bool{}
	// The SDK excludes tools it cannot call correctly (invalid x-mcp-header annotations,
	// SEP-2243). They stay in the snapshot as evidence, flagged, and are not callable.
	sdkKept := map[string]bool{}
	caches := false
	cursor := ""
	for page := 0; ; page++ {
		if page >= s.lim.MaxPages {
			return nil, refuse(RefusalTooManyPages, op, int64(s.lim.MaxPages), ErrTooManyPages)
		}
		params := &mcp.ListToolsParams{Cursor: cursor}
		var typed *mcp.ListToolsResult
		raw, page, _, served, err := s.exchange(ctx, op, st, func(ctx context.Context) error {
			res, err := s.cs.ListTools(ctx, params)
			typed = res
			return err
		})
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if served {
			raw, page = s.pages[cursor], nil
		} else {
			s.pages[cursor] = raw
		}
		s.mu.Unlock()
		if raw == nil {
			return nil, refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
		}
		if page == nil {
			// Served from the SDK's cache, or a page the split refused when it was recorded.
			pg, err := readPage(raw)
			if err != nil {
				return nil, err
			}
			page = &pg
		}
		pg := *page
		res := struct {
			Tools      []json.RawMessage
			NextCursor *string
		}{pg.tools, pg.next}
		if typed == nil {
			// The SDK failed to decode the page it was handed (its tool cache does not hold it).
			caches = true
		} else {
			caches = caches || typed.TTLMs > 0
			for _, t := range typed.Tools {
				sdkKept[t.Name] = true
			}
		}
		for _, d := range res.Tools {
			if len(d) > s.lim.MaxDescriptorBytes {
				return nil, refuse(RefusalDescriptorTooLarge, op, int64(s.lim.MaxDescriptorBytes), ErrDescriptorTooLarge)
			}
			if len(descs) >= s.lim.MaxTools {
				return nil, refuse(RefusalTooManyTools, op, int64(s.lim.MaxTools), ErrTooManyTools)
			}
			descs = append(descs, d)
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			break
		}
		if seen[*res.NextCursor] || *res.NextCursor == cursor {
			return nil, refuse(RefusalRepeatedCursor, op, 0, ErrRepeatedCursor)
		}
		seen[*res.NextCursor] = true
		cursor = *res.NextCursor
	}
	snap, err := snapshot.New(s.proto, s.server, descs)
	if err != nil {
		return nil, err
	}
	// A tool the SDK was handed is callable only if the SDK kept it: it dropped the tool (invalid
	// annotations), or it could not decode the page at all (a descriptor member of the wrong type:
	// the SDK judged none of the page's tools, and its tool cache holds none of them). The other
	// tools were withheld from it by the transports (sdkNeedsTool, sdkListResult): they carry no
	// x-mcp-header annotation, and the SDK had nothing to judge.
	excluded := map[string]bool{}
	for _, t := range snap.Tools {
		if !sdkKept[t.Name] && sdkNeedsTool(t.Descriptor) {
			excluded[t.Name] = true
		}
	}
	if len(excluded) > 0 {
		for name := range excluded {
			snap.Warnings = append(snap.Warnings, snapshot.Warning{Tool: name, Path: "/inputSchema", Code: WarnInvalidToolHeaders})
		}
		snapshot.SortWarnings(snap.Warnings)
	}
	s.mu.Lock()
	s.last = snap
	s.excluded = excluded
	s.sdkCaches, s.sdkToolsCleared = caches, false
	s.mu.Unlock()
	return snap, nil
}

// CallTool calls the tool name with args (one JSON object; nil or empty means {}) and returns the
// complete result object exactly as received. A result with "isError": true is returned as a
// *ToolError carrying the same JSON. Multi-round results ("resultType" other than "complete") are
// refused by name ("input_required", "multi_round"), as is a tool whose descriptor requires task
// execution ("tasks"). If this session has not listed tools yet, CallTool lists them first to
// learn the descriptor.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	const op = "tools/call"
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if len(args) > s.lim.MaxArgumentBytes {
		return nil, refuse(RefusalArgumentTooLarge, op, int64(s.lim.MaxArgumentBytes), ErrArgumentTooLarge)
	}
	if err := snapshot.Validate(args); err != nil || args[0] != '{' {
		return nil, refuse(RefusalInvalidArguments, op, 0, ErrInvalidArguments)
	}
	s.mu.Lock()
	snap, excluded := s.last, s.excluded
	s.mu.Unlock()
	if snap == nil {
		var err error
		if snap, err = s.ListTools(ctx); err != nil {
			return nil, err
		}
		s.mu.Lock()
		excluded = s.excluded
		s.mu.Unlock()
	}
	if excluded[name] {
		return nil, refuse(RefusalInvalidToolHeaders, op, 0, ErrInvalidToolHeaders)
	}
	t, listed := snap.Lookup(name)
	if listed && taskRequired(t.Descriptor) {
		return nil, &FeatureRefusedError{Feature: RefusalTasks, Op: op}
	}

	ctx, st, done := s.begin(ctx, op)
	defer done()
	var fn func(context.Context) error
	if s.directUsable() {
		fn = func(ctx context.Context) error { return s.callDirect(ctx, name, args, t.Descriptor) }
	} else {
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		fn = func(ctx context.Context) error {
			_, err := s.cs.CallTool(ctx, params)
			return err
		}
	}
	raw, _, scanned, _, err := s.exchange(ctx, op, st, fn)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
	}
	if len(raw) > s.lim.MaxResultBytes {
		return nil, refuse(RefusalResultTooLarge, op, int64(s.lim.MaxResultBytes), ErrResultTooLarge)
	}
	if !scanned {
		if err := snapshot.Validate(raw); err != nil {
			return nil, err
		}
	}
	res, ok := parseCallResult(raw)
	if !ok {
		return nil, refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
	}
	switch res.ResultType {
	case "", "complete":
	case "input_required":
		return nil, &FeatureRefusedError{Feature: RefusalInputRequired, Op: op}
	case "task":
		return nil, &FeatureRefusedError{Feature: RefusalTasks, Op: op}
	default:
		return nil, &FeatureRefusedError{Feature: RefusalMultiRound, Op: op}
	}
	if res.IsError {
		return nil, &ToolError{Tool: name, Result: raw}
	}
	return raw, nil
}

// callResult is what the client reads of a tools/call result; the rest stays raw.
type callResult struct {
	IsError    bool   `json:"isError"`
	ResultType string `json:"resultType"`
}

// parseCallResult reads a tools/call result object with exact-case member names: an "IsError"
// or "ResultType" variant is an unknown member, not a second value for the field. The result is
// split strictly (snapshot.Members: grammar, UTF-8, unique member names at every depth) and only
// isError and resultType are decoded (snapshot.Unmarshal); ok is false for anything else.
func parseCallResult(raw []byte) (callResult, bool) {
	ms, err := snapshot.Members(raw)
	if err != nil {
		return callResult{}, false
	}
	var res callResult
	for _, m := range ms {
		switch m.Name {
		case "isError":
			if snapshot.Unmarshal(m.Value, &res.IsError) != nil {
				return callResult{}, false
			}
		case "resultType":
			if snapshot.Unmarshal(m.Value, &res.ResultType) != nil {
				return callResult{}, false
			}
		}
	}
	return res, true
}

// taskRequired reports whether a descriptor demands task-augmented execution.
func taskRequired(desc []byte) bool {
	var d struct {
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	return snapshot.Unmarshal(desc, &d) == nil && d.Execution.TaskSupport == "required"
}

// listPage is a tools/list result as readPage splits it.
type listPage struct {
	// tools are the descriptors as received: sub-slices of the result, not copies.
	tools []json.RawMessage
	next  *string
	// lo and hi locate the "tools" array in the result (brackets included).
	lo, hi int
	// plainTools reports that the "tools" member name is spelled without an escape.
	plainTools bool
}

// readPage splits a tools/list result in one strict pass (snapshot.MembersAndElements: grammar,
// UTF-8, unique member names at every depth, the descriptors included) without decoding the
// descriptors, which snapshot.New freezes one by one. The result must be an object whose "tools"
// member is an array and whose "nextCursor" is absent, null or a string (exact-case names); any
// other page is refused invalid_response, and a page the scan refuses (invalid UTF-8, a duplicate
// member) by the scan's name.
func readPage(raw []byte) (listPage, error) {
	invalid := refuse(RefusalInvalidResponse, opListTools, 0, ErrInvalidResponse)
	ms, tools, err := snapshot.MembersAndElements(raw, "tools")
	if err != nil {
		var sr *snapshot.RefusalError
		if errors.As(err, &sr) && sr.Name != snapshot.RefusalInvalidJSON {
			return listPage{}, err
		}
		return listPage{}, invalid
	}
	if tools == nil {
		return listPage{}, invalid
	}
	p := listPage{tools: tools}
	for _, m := range ms {
		switch m.Name {
		case "tools":
			p.lo, p.hi = m.Offset, m.Offset+len(m.Value)
			p.plainTools = plainNameBefore(raw[:p.lo], "tools")
		case "nextCursor":
			if snapshot.Unmarshal(m.Value, &p.next) != nil {
				return listPage{}, invalid
			}
		}
	}
	return p, nil
}

// plainNameBefore reports whether head, the part of a checked object up to one member's value,
// ends with that member's name spelled plainly: "name", then the colon (whitespace allowed).
func plainNameBefore(head []byte, name string) bool {
	head = bytes.TrimRight(head, " \t\n\r")
	head, ok := bytes.CutSuffix(head, []byte{':'})
	if !ok {
		return false
	}
	head = bytes.TrimRight(head, " \t\n\r")
	return len(head) >= len(name)+2 && head[len(head)-1] == '"' && head[len(head)-len(name)-2] == '"' &&
		string(head[len(head)-len(name)-1:len(head)-1]) == name
}
