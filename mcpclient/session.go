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
	"unicode/utf8"

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

// begin prepares one bounded request: a context with the call deadline, cancellable with a
// refusal cause, carrying the callState the transports fill in.
func (s *Session) begin(ctx context.Context, op string) (context.Context, *callState, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	tctx, stop := context.WithTimeoutCause(cctx, s.lim.CallTimeout,
		refuse(RefusalCallTimeout, op, s.lim.CallTimeout.Milliseconds(), ErrCallTimeout))
	st := &callState{op: op, cancel: cancel}
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
// checked by encoding/json.
func (s *Session) exchange(ctx context.Context, op string, st *callState, fn func(context.Context) error) (raw json.RawMessage, scanned, served bool, err error) {
	if f := s.reg.sessionFault(); f != nil {
		return nil, false, false, s.outcomeErr(op, ctx, nil, f)
	}
	if s.broken.Load() {
		// A direct exchange failed what would have been the SDK's connection.
		return nil, false, false, s.outcomeErr(op, ctx, nil, errSDKConnFailed)
	}
	// A fresh state per request, sharing the operation's cancel function.
	req := &callState{op: op, cancel: st.cancel}
	s.reg.track(req)
	defer s.reg.untrack(req)
	rctx := context.WithValue(ctx, callKey{}, req)
	sdkErr := fn(rctx)
	if cause := context.Cause(rctx); cause != nil {
		var fr *FeatureRefusedError
		var r *RefusalError
		if errors.As(cause, &fr) || errors.As(cause, &r) {
			return nil, false, false, s.outcomeErr(op, rctx, req, cause)
		}
	}
	req.mu.Lock()
	got, result, rpcErr, scanned := req.got, req.result, req.rpcErr, req.scanned
	req.mu.Unlock()
	if got && !rpcErr {
		return result, scanned, false, nil
	}
	if sdkErr == nil && !got {
		return nil, false, true, nil
	}
	if sdkErr == nil {
		sdkErr = errors.New("error response")
	}
	return nil, false, false, s.outcomeErr(op, rctx, req, sdkErr)
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
		raw, _, served, err := s.exchange(ctx, op, st, func(ctx context.Context) error {
			res, err := s.cs.ListTools(ctx, params)
			typed = res
			return err
		})
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if served {
			raw = s.pages[cursor]
		} else {
			s.pages[cursor] = raw
		}
		s.mu.Unlock()
		if raw == nil {
			return nil, refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
		}
		tools, next, err := parsePage(raw)
		if err != nil {
			return nil, err
		}
		res := struct {
			Tools      []json.RawMessage
			NextCursor *string
		}{tools, next}
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
	raw, scanned, _, err := s.exchange(ctx, op, st, fn)
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
// or "ResultType" variant is an unknown member, not a second value for the field. raw has passed
// the strict scan (grammar, UTF-8, unique member names). The common result is read in one light
// pass over its top-level members (splitCallResult); any other goes to snapshot.Unmarshal.
func parseCallResult(raw []byte) (callResult, bool) {
	if res, ok := splitCallResult(raw); ok {
		return res, true
	}
	var res callResult
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || snapshot.Unmarshal(raw, &res) != nil {
		return callResult{}, false
	}
	return res, true
}

// splitCallResult reads isError and resultType from the top-level members of a result whose
// grammar was already checked, decoding only those two values (exactly as snapshot.Unmarshal
// decodes them); ok is false for anything it does not expect (a member name with an escape
// included), and parseCallResult's full decode decides.
func splitCallResult(raw []byte) (res callResult, ok bool) {
	p := pageSplitter{b: raw}
	var seenErr, seenType bool
	p.ws()
	if !p.eat('{') {
		return callResult{}, false
	}
	for first := true; ; first = false {
		p.ws()
		if first && p.eat('}') {
			break
		}
		name, ok := p.plainString()
		if !ok {
			return callResult{}, false
		}
		p.ws()
		if !p.eat(':') {
			return callResult{}, false
		}
		p.ws()
		v, ok := p.value()
		if !ok {
			return callResult{}, false
		}
		// A repeated isError or resultType (not possible after the strict scan) goes to the full
		// decode, which refuses it.
		switch name {
		case "isError":
			if seenErr || snapshot.Unmarshal(v, &res.IsError) != nil {
				return callResult{}, false
			}
			seenErr = true
		case "resultType":
			if seenType || snapshot.Unmarshal(v, &res.ResultType) != nil {
				return callResult{}, false
			}
			seenType = true
		}
		p.ws()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return callResult{}, false
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return callResult{}, false
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

// parsePage reads a tools/list result: the raw descriptors (sub-slices of raw, not copies) and the
// next cursor. The common page is split in one light pass (splitPage); any other page goes to
// parsePageTokens, which names the refusal (or lets snapshot.New name it, with the tool).
func parsePage(raw []byte) ([]json.RawMessage, *string, error) {
	if tools, next, ok := splitPage(raw); ok {
		return tools, next, nil
	}
	return parsePageTokens(raw)
}

// splitPage splits a tools/list result without decoding the descriptors: they are each checked
// in full (grammar, UTF-8, duplicate members, numbers) when snapshot.New freezes them, so checking
// them here too would be a second full parse. What New does not check is checked here: the result
// is valid UTF-8, an object whose member names are plain (no escape) and unique, "tools" is an
// array, "nextCursor" is absent, null or a string (exact-case decode), and every other member
// passes snapshot.Validate. The transports have already refused a frame that is not JSON (stdio:
// encoding/json's check of the line; HTTP: the strict scan of the frame), so the structure the
// split relies on holds; ok is false for anything it does not expect, and parsePageTokens decides.
func splitPage(raw []byte) (tools []json.RawMessage, next *string, ok bool) {
	tools, next, _, _, ok = splitPageAt(raw)
	return tools, next, ok
}

// splitPageAt is splitPage that also returns where the "tools" array is: raw[lo:hi], brackets
// included.
func splitPageAt(raw []byte) (tools []json.RawMessage, next *string, lo, hi int, ok bool) {
	if !utf8.Valid(raw) {
		return nil, nil, 0, 0, false
	}
	p := pageSplitter{b: raw}
	p.ws()
	if !p.eat('{') {
		return nil, nil, 0, 0, false
	}
	var names [8]string
	seen := names[:0]
	for first := true; ; first = false {
		p.ws()
		if first && p.eat('}') {
			break
		}
		name, ok := p.plainString()
		if !ok {
			return nil, nil, 0, 0, false
		}
		for _, n := range seen {
			if n == name {
				return nil, nil, 0, 0, false
			}
		}
		seen = append(seen, name)
		p.ws()
		if !p.eat(':') {
			return nil, nil, 0, 0, false
		}
		p.ws()
		switch name {
		case "tools":
			lo = p.i
			if tools, ok = p.array(); !ok {
				return nil, nil, 0, 0, false
			}
			hi = p.i
		default:
			v, ok := p.value()
			if !ok {
				return nil, nil, 0, 0, false
			}
			if name == "nextCursor" {
				if snapshot.Unmarshal(v, &next) != nil {
					return nil, nil, 0, 0, false
				}
			} else if snapshot.Validate(v) != nil {
				return nil, nil, 0, 0, false
			}
		}
		p.ws()
		if p.eat('}') {
			break
		}
		if !p.eat(',') {
			return nil, nil, 0, 0, false
		}
	}
	p.ws()
	if p.i != len(p.b) || tools == nil {
		return nil, nil, 0, 0, false
	}
	return tools, next, lo, hi, true
}

// pageSplitter finds the extent of JSON values in text whose grammar was already checked; every
// step is bounds-checked, so any input is safe, and a step that finds something unexpected fails.
type pageSplitter struct {
	b []byte
	i int
}

func (p *pageSplitter) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *pageSplitter) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a string with no escape and no control character.
func (p *pageSplitter) plainString() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return string(p.b[start : p.i-1]), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// skipString moves past a string (at its opening quote), escapes included.
func (p *pageSplitter) skipString() bool {
	p.i++
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			p.i++
			return true
		case '\\':
			p.i++
		}
		p.i++
	}
	return false
}

// value returns the extent of the value at p.i: a string, an object or array (brackets balanced
// outside strings), or a literal or number (up to the next delimiter).
func (p *pageSplitter) value() ([]byte, bool) {
	start := p.i
	if p.i >= len(p.b) {
		return nil, false
	}
	switch p.b[p.i] {
	case '"':
		if !p.skipString() {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for p.i < len(p.b) {
			switch p.b[p.i] {
			case '"':
				if !p.skipString() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			p.i++
			if depth == 0 {
				break
			}
		}
		if depth != 0 {
			return nil, false
		}
	default:
		for p.i < len(p.b) {
			c := p.b[p.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			p.i++
		}
	}
	if p.i == start {
		return nil, false
	}
	return p.b[start:p.i:p.i], true
}

// array returns the elements of the array at p.i (empty, not nil, for []).
func (p *pageSplitter) array() ([]json.RawMessage, bool) {
	if !p.eat('[') {
		return nil, false
	}
	out := make([]json.RawMessage, 0, 64)
	p.ws()
	if p.eat(']') {
		return out, true
	}
	for {
		p.ws()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		p.ws()
		if p.eat(']') {
			return out, true
		}
		if !p.eat(',') {
			return nil, false
		}
	}
}

// parsePageTokens reads a tools/list result token by token. Member names of the result object must
// be unique; the descriptors themselves are validated when frozen.
func parsePageTokens(raw []byte) ([]json.RawMessage, *string, error) {
	const op = "tools/list"
	invalid := refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
	if !utf8.Valid(raw) {
		return nil, nil, &snapshot.RefusalError{Name: snapshot.RefusalInvalidUTF8, Err: snapshot.ErrInvalidUTF8}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, invalid
	}
	var (
		tools []json.RawMessage
		next  *string
		seen  = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, nil, invalid
		}
		if seen[key] {
			return nil, nil, &snapshot.RefusalError{Name: snapshot.RefusalDuplicateKey, Err: snapshot.ErrDuplicateKey}
		}
		seen[key] = true
		switch key {
		case "tools":
			if err := dec.Decode(&tools); err != nil {
				return nil, nil, invalid
			}
		case "nextCursor":
			if err := dec.Decode(&next); err != nil {
				return nil, nil, invalid
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, invalid
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, invalid
	}
	if tools == nil {
		return nil, nil, invalid
	}
	return tools, next, nil
}
