package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/wire"
	"github.com/b10x/connector-mcp/snapshot"
)

// The SDK decodes responses into typed structs (and fails on unknown content types). To stay
// lossless, every inbound message is also seen here, below the SDK, as raw bytes: at the stdio
// Connection (a connection we own) and at the HTTP RoundTripper. The raw result of each of our own
// requests is kept in its callState, found by the JSON-RPC id.

// callKey is the context key carrying the *callState of one request.
type callKey struct{}

// callState is what one of our requests received, recorded below the SDK.
type callState struct {
	op     string
	cancel context.CancelCauseFunc
	// guardDiscover (HTTP connect that may probe): a server/discover exchange that gets no
	// recognised answer ends the whole connect with a transport error, so the SDK's built-in
	// fallback cannot turn a transport failure into a legacy verdict.
	guardDiscover bool

	mu      sync.Mutex
	got     bool
	result  json.RawMessage
	scanned bool // result is part of a frame that passed the strict scan (snapshot.Members/Validate)
	rpcErr  bool
	rpcCode int64
	rpcData json.RawMessage
	status  int
	// scopes is set (possibly empty) when a 403 carried an insufficient_scope challenge.
	scopes []string
	// insufficientScope records that challenge.
	insufficientScope bool
}

// deliver records the first response to the request; it reports whether this one was recorded.
// scanned says that the frame carrying it passed the strict scan.
func (st *callState) deliver(result json.RawMessage, scanned, isErr bool, code int64, data json.RawMessage) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.got {
		return false
	}
	st.got = true
	if isErr {
		st.rpcErr, st.rpcCode, st.rpcData = true, code, bytes.Clone(data)
		return true
	}
	st.result, st.scanned = bytes.Clone(result), scanned
	return true
}

func (st *callState) setStatus(code int, h http.Header) {
	st.mu.Lock()
	st.status = code
	if code == http.StatusForbidden {
		st.scopes, st.insufficientScope = insufficientScope(h.Values("WWW-Authenticate"))
	}
	st.mu.Unlock()
}

// registry maps the ids of in-flight requests to their callState, and records session faults.
type registry struct {
	mu       sync.Mutex
	byID     map[string]*callState
	inflight map[*callState]struct{}
	fault    error
}

func (r *registry) track(st *callState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight == nil {
		r.inflight = map[*callState]struct{}{}
	}
	r.inflight[st] = struct{}{}
}

func (r *registry) untrack(st *callState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, st)
	for id, s := range r.byID {
		if s == st {
			delete(r.byID, id)
		}
	}
}

func (r *registry) bind(id string, st *callState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = map[string]*callState{}
	}
	r.byID[id] = st
}

func (r *registry) lookup(id string) *callState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// failAll records err as the session's fault (the first one wins) and ends every in-flight
// request with it.
func (r *registry) failAll(err error) {
	r.mu.Lock()
	if r.fault == nil {
		r.fault = err
	}
	r.mu.Unlock()
	r.cancelInflight(err)
}

// cancelInflight ends every in-flight request with err, leaving the session usable.
func (r *registry) cancelInflight(err error) {
	r.mu.Lock()
	states := make([]*callState, 0, len(r.inflight))
	for st := range r.inflight {
		states = append(states, st)
	}
	r.mu.Unlock()
	for _, st := range states {
		st.cancel(err)
	}
}

// fail ends the request st with err, or the whole session when st is nil.
func (r *registry) fail(st *callState, err error) {
	if st != nil {
		st.cancel(err)
		return
	}
	r.failAll(err)
}

func (r *registry) sessionFault() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fault
}

// idKey normalises a JSON-RPC id to its compact JSON text.
func idKey(raw any) string {
	b, err := json.Marshal(raw)
	if err != nil {
		return ""
	}
	return string(b)
}

// deliverFrame refuses a frame that is not JSON and records the responses it carries. When the
// frame is one successful response to a tools/call request and has been recorded, it returns the
// frame the SDK is handed instead (see replaceResult); otherwise the SDK gets raw unchanged.
func (r *registry) deliverFrame(st *callState, raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	// The whole frame is checked as the snapshot scanner checks a descriptor (grammar, UTF-8,
	// duplicate members at any depth), so the exact-case reading below sees the members the SDK
	// read, and a hostile frame is refused by name for the request it answers. A single message
	// is checked and split into its members in the same scan.
	var err error
	if raw[0] == '{' {
		var ms []snapshot.Member
		if ms, err = snapshot.Members(raw); err == nil {
			if rep := r.deliverMembers(ms); rep != nil {
				return replaceResult(ms, rep), nil
			}
			return nil, nil
		}
	} else if err = snapshot.Validate(raw); err == nil {
		r.deliverRaw(raw)
		return nil, nil
	}
	name, reason := snapshot.RefusalInvalidJSON, snapshot.ErrInvalidJSON
	var sr *snapshot.RefusalError
	if errors.As(err, &sr) {
		name, reason = sr.Name, sr.Err
	}
	rerr := refuse(name, "", 0, reason)
	r.fail(st, rerr)
	return nil, rerr
}

// placeholderResult is the result the SDK decodes in place of a recorded tools/call result.
const placeholderResult = `{}`

// replaceResult rebuilds a response frame from its members as received, the "result" value
// replaced by result: placeholderResult for a recorded tools/call result, or a recorded
// tools/list result with the descriptors the SDK need not see withheld (see sdkListResult).
//
// The raw result has already been checked (strict scan) and recorded below the SDK, and the
// client returns or freezes those bytes, never the SDK's typed decode of them; handing the SDK the
// whole result only made it decode it again into Go values that are thrown away. Every other
// member reaches the SDK as received, so its verdict on the envelope (version tag, id, unknown
// members) is unchanged.
func replaceResult(ms []snapshot.Member, result []byte) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.Name) + len(m.Value) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendName(out, m.Name)
		out = append(out, ':')
		if m.Name == "result" {
			out = append(out, result...)
		} else {
			out = append(out, m.Value...)
		}
	}
	return append(out, '}')
}

// sdkNeedsTool reports whether the SDK must see a tool descriptor: whether it may carry an
// x-mcp-header annotation (SEP-2243), the only thing the SDK's ListTools judges a tool by (it
// excludes a tool whose annotations are invalid) or keeps from it (its tool cache, from which it
// derives the Mcp-Param-* headers of a call). The SDK reads member names exactly (case-sensitive),
// so the key is spelled either plainly or with at least one \u escape; a descriptor with neither
// has no such annotation. A descriptor that is not an object is handed over too, so the SDK's
// verdict on it (a failed decode, or its exclusion of a null tool) stays as it was.
func sdkNeedsTool(desc []byte) bool {
	return len(desc) == 0 || desc[0] != '{' ||
		bytes.Contains(desc, []byte("x-mcp-header")) || bytes.Contains(desc, []byte(`\u`))
}

// sdkListResult returns the tools/list result the SDK is handed in place of the recorded result
// raw: every member as received, the "tools" array holding only the descriptors sdkNeedsTool
// keeps, in their order. It returns nil (the SDK gets raw as received) when nothing is withheld,
// when raw is not a page readPage reads, or when its "tools" member name is spelled with an
// escape (a page no real server writes: the SDK reads it whole, as received).
//
// The SDK's typed decode and x-mcp-header filter of every descriptor was most of the cost of a
// listing, and mcpclient freezes the raw descriptors it recorded, not the SDK's decode. What the
// SDK still sees is all it acts on: the tools whose annotations it may exclude (Session.ListTools
// flags exactly those it dropped), and the annotations it keeps in its tool cache for the calls
// it makes. A withheld tool has no annotation: called through the SDK, it is not in the SDK's
// cache, which the SDK only consults for headers (it never refuses a tool it has not listed), so
// it gets the headers it would have had: none.
func sdkListResult(raw []byte) []byte {
	pg, err := readPage(raw)
	if err != nil || !pg.plainTools {
		return nil
	}
	tools, lo, hi := pg.tools, pg.lo, pg.hi
	keep := 0
	for _, d := range tools {
		if sdkNeedsTool(d) {
			keep++
		}
	}
	if keep == len(tools) {
		return nil
	}
	n := lo + 2 + len(raw) - hi
	for _, d := range tools {
		if sdkNeedsTool(d) {
			n += len(d) + 1
		}
	}
	out := make([]byte, 0, n)
	out = append(out, raw[:lo]...)
	out = append(out, '[')
	first := true
	for _, d := range tools {
		if !sdkNeedsTool(d) {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, d...)
	}
	out = append(out, ']')
	return append(out, raw[hi:]...)
}

// appendName appends a member name as a JSON string (the name is valid UTF-8: the frame passed
// the strict scan).
func appendName(out []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' {
			b, _ := json.Marshal(name)
			return append(out, b...)
		}
	}
	out = append(out, '"')
	out = append(out, name...)
	return append(out, '"')
}

// deliverRaw records the responses among raw (one message or a batch, already checked by
// snapshot.Validate) in their callStates.
func (r *registry) deliverRaw(raw []byte) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if raw[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(raw, &batch) == nil {
			for _, m := range batch {
				r.deliverRaw(m)
			}
		}
		return
	}
	if ms, err := snapshot.Members(raw); err == nil {
		r.deliverMembers(ms)
	}
}

// rpcError is the part of a JSON-RPC error object the client reads.
type rpcError struct {
	Code int64           `json:"code"`
	Data json.RawMessage `json:"data"`
}

// deliverMembers records one JSON-RPC response, given as its members (exact-case names; the
// values as received), in its callState. A request or notification (a "method" member), a
// message without an id, or a member of the wrong type is not recorded. When the message was
// recorded as the successful result of a tools/call or tools/list request, it returns the result
// the SDK is handed instead (see sdkResult and replaceResult); otherwise nil.
func (r *registry) deliverMembers(ms []snapshot.Member) []byte {
	var id, result json.RawMessage
	var rpcErr *rpcError
	for _, m := range ms {
		switch m.Name {
		case "id":
			id = m.Value
		case "method":
			var method string
			if snapshot.Unmarshal(m.Value, &method) != nil || method != "" {
				return nil
			}
		case "result":
			result = m.Value
		case "error":
			if snapshot.Unmarshal(m.Value, &rpcErr) != nil {
				return nil
			}
		}
	}
	if len(id) == 0 {
		return nil
	}
	var idv any
	if json.Unmarshal(id, &idv) != nil {
		return nil
	}
	st := r.lookup(idKey(idv))
	if st == nil {
		return nil
	}
	if rpcErr != nil {
		st.deliver(nil, true, true, rpcErr.Code, rpcErr.Data)
		return nil
	}
	// Every caller checked the whole frame first (snapshot.Members or snapshot.Validate).
	if !st.deliver(result, true, false, 0, nil) {
		return nil
	}
	return sdkResult(st.op, result)
}

// opCallTool is the operation whose recorded results the SDK sees as placeholders.
const opCallTool = "tools/call"

// opListTools is the operation whose recorded results the SDK sees with the descriptors it need
// not see withheld (see sdkListResult).
const opListTools = "tools/list"

// sdkResult returns the result the SDK is handed in place of the recorded successful result of
// an op request, or nil when it gets the result as received.
func sdkResult(op string, result json.RawMessage) []byte {
	switch {
	case len(result) == 0:
		return nil
	case op == opCallTool:
		return []byte(placeholderResult)
	case op == opListTools:
		return sdkListResult(result)
	}
	return nil
}

// captureConn wraps the stdio connection (ours; the SDK's HTTP connection is never wrapped) to
// bind request ids to callStates and record raw responses.
type captureConn struct {
	mcp.Connection
	reg *registry
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if st, ok := ctx.Value(callKey{}).(*callState); ok {
			c.reg.bind(idKey(req.ID.Raw()), st)
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		if st := c.reg.lookup(idKey(resp.ID.Raw())); st != nil {
			var werr *jsonrpc.Error
			switch {
			case errors.As(resp.Error, &werr):
				st.deliver(nil, false, true, werr.Code, werr.Data)
			case resp.Error != nil:
				st.deliver(nil, false, true, 0, nil)
			default:
				if st.deliver(resp.Result, false, false, 0, nil) {
					// Recorded: the SDK decodes a placeholder or a listing with the tools it
					// need not see withheld (see sdkResult).
					if rep := sdkResult(st.op, resp.Result); rep != nil {
						resp.Result = rep
					}
				}
			}
		}
	}
	return msg, err
}

// boundTransport is the http.RoundTripper under the SDK: it binds request ids to callStates,
// bounds every response body (JSON body or SSE event) to the frame limit, and records raw
// responses. It wraps the configured client's transport, whatever it is.
type boundTransport struct {
	base  http.RoundTripper
	reg   *registry
	frame int
}

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(callKey{}).(*callState)
	discover := false
	if st != nil && req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			// The outgoing request the SDK wrote, not server data: a bounded plain decode.
			if json.NewDecoder(io.LimitReader(body, int64(t.frame))).Decode(&m) == nil && len(m.ID) > 0 && m.Method != "" {
				var id any
				if json.Unmarshal(m.ID, &id) == nil {
					t.reg.bind(idKey(id), st)
				}
			}
			discover = m.Method == methodDiscover
			body.Close()
		}
	}
	resp, err := t.base.RoundTrip(req)
	if discover && st.guardDiscover {
		if terr := probeTransportFailure(req, resp, err); terr != nil {
			st.cancel(terr)
		}
	}
	if err != nil || resp == nil {
		return resp, err
	}
	if st != nil {
		st.setStatus(resp.StatusCode, resp.Header)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return resp, nil
	}
	ct := wire.MediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 300 && ct != "application/json" {
		// An error page (e.g. a 401 from an authorization gateway) is not a protocol frame:
		// bound it, but let the status, not its prose, explain the failure.
		resp.Body = &errorBody{body: resp.Body, limit: int64(t.frame)}
		resp.ContentLength = -1
		return resp, nil
	}
	if ct == "text/event-stream" {
		resp.Body = &sseBody{body: resp.Body, reg: t.reg, st: st, limit: t.frame, probe: probeReq(discover, st, req)}
	} else {
		resp.Body = &jsonBody{body: resp.Body, reg: t.reg, st: st, limit: t.frame, probe: probeReq(discover, st, req)}
	}
	resp.ContentLength = -1
	return resp, nil
}

const methodDiscover = "server/discover"

// probeFailure is the cause that ends a connect whose server/discover exchange got no recognised
// answer: no HTTP response at all (dial error, refused or reset connection, EOF, TLS, a refusal
// of the egress transport, timeout) or an overload/error page (408, 429, 5xx). That is not a
// verdict on the protocol era. A 4xx answer (400/404/405 with or without a JSON-RPC error body)
// is one, and is left to the negotiation. outcomeErr maps it to the error it stands for.
type probeFailure struct {
	err    error // the RoundTrip error, when there was no response
	status int   // the HTTP status of the error page
}

func (p *probeFailure) Error() string { return "mcpclient: server/discover got no answer" }

func probeTransportFailure(req *http.Request, resp *http.Response, err error) *probeFailure {
	if err != nil || resp == nil {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		// When the connect context already ended (probe deadline, caller), its first cause stays.
		// Wrapped as the http.Client would (the URL never reaches an error message).
		return &probeFailure{err: &url.Error{Op: req.Method, URL: req.URL.Redacted(), Err: err}}
	}
	switch s := resp.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s >= 500:
		return &probeFailure{status: s}
	}
	return nil
}

// probeReq returns the guarded server/discover request whose response body is read, or nil.
func probeReq(discover bool, st *callState, req *http.Request) *http.Request {
	if discover && st.guardDiscover {
		return req
	}
	return nil
}

// probeBodyFailed ends the connect when the body of a guarded server/discover response breaks
// before it is complete (reset, unexpected EOF): an answer cut short is no answer.
func probeBodyFailed(req *http.Request, st *callState, err error) {
	if req != nil && err != nil && !errors.Is(err, io.EOF) {
		st.cancel(&probeFailure{err: &url.Error{Op: req.Method, URL: req.URL.Redacted(), Err: err}})
	}
}

// errorBody bounds a non-protocol error body (read only so the connection can be reused).
type errorBody struct {
	body  io.ReadCloser
	limit int64
	read  int64
}

func (b *errorBody) Read(p []byte) (int, error) {
	if b.read >= b.limit {
		return 0, io.EOF
	}
	if int64(len(p)) > b.limit-b.read {
		p = p[:b.limit-b.read]
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *errorBody) Close() error { return b.body.Close() }

func frameRefusal(limit int) *RefusalError {
	return refuse(RefusalFrameTooLarge, "", int64(limit), ErrFrameTooLarge)
}

// jsonBody bounds a JSON response body and records the response it carries. The body is read
// whole (within the bound) before the SDK gets any of it, as the SDK reads it whole anyway: the
// SDK then reads the frame as received, or the placeholder frame for a recorded tools/call
// result (see replaceResult).
type jsonBody struct {
	body  io.ReadCloser
	probe *http.Request // a guarded server/discover (see probeBodyFailed)
	reg   *registry
	st    *callState
	limit int
	buf   []byte
	out   []byte // what the SDK reads, once the body is complete
	done  bool
	err   error // the terminal error, returned once out is drained
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if !b.done {
		b.fill()
	}
	if len(b.out) > 0 {
		n := copy(p, b.out)
		b.out = b.out[n:]
		return n, nil
	}
	return 0, b.err
}

// fill reads the whole body within the bound and records the response it carries.
func (b *jsonBody) fill() {
	b.done = true
	for {
		switch {
		case cap(b.buf) == 0:
			b.buf = make([]byte, 0, 4096)
		case len(b.buf) == cap(b.buf):
			b.buf = append(b.buf, 0)[:len(b.buf)]
		}
		n, err := b.body.Read(b.buf[len(b.buf):cap(b.buf)])
		probeBodyFailed(b.probe, b.st, err)
		if len(b.buf)+n > b.limit {
			b.err = frameRefusal(b.limit)
			b.reg.fail(b.st, b.err)
			b.buf = nil
			return
		}
		b.buf = b.buf[:len(b.buf)+n]
		if errors.Is(err, io.EOF) {
			rep, ferr := b.reg.deliverFrame(b.st, b.buf)
			if ferr != nil {
				b.err, b.buf = ferr, nil
				return
			}
			b.out, b.err = b.buf, io.EOF
			if rep != nil {
				b.out = rep
			}
			b.buf = nil
			return
		}
		if err != nil {
			// A body cut short: the SDK sees the read error, as it would have after the bytes.
			b.err, b.buf = err, nil
			return
		}
	}
}

func (b *jsonBody) Close() error { return b.body.Close() }

// sseBody bounds each server-sent event (and each line) and records the responses it carries.
// The lines of an event are held until the event ends, and only then handed to the SDK: as
// received, or with the data lines replaced by the placeholder frame when the event carried a
// recorded tools/call result (see replaceResult).
type sseBody struct {
	body  io.ReadCloser
	probe *http.Request // a guarded server/discover (see probeBodyFailed)
	reg   *registry
	st    *callState
	limit int
	line  []byte // the current partial line
	data  []byte // the current event's data, joined
	size  int
	evt   []byte // the current event's complete lines, as received
	meta  []byte // the same lines without the data lines
	plain bool   // every line of the current event is a "field: value" line
	out   []byte // bytes ready for the SDK
	err   error  // a refusal: returned at once
	rerr  error  // the body's terminal error, returned once out is drained
}

func (b *sseBody) Read(p []byte) (int, error) {
	for {
		if b.err != nil {
			return 0, b.err
		}
		if len(b.out) > 0 {
			n := copy(p, b.out)
			b.out = b.out[n:]
			return n, nil
		}
		if b.rerr != nil {
			return 0, b.rerr
		}
		if len(p) == 0 {
			return 0, nil
		}
		// p is the read buffer: process copies what it keeps before p is written.
		n, err := b.body.Read(p)
		probeBodyFailed(b.probe, b.st, err)
		b.out = b.out[:0]
		if b.process(p[:n]) {
			continue // b.err is set
		}
		if err != nil {
			// The rest of an unfinished event goes to the SDK as received.
			b.out = append(append(b.out, b.evt...), b.line...)
			b.evt, b.meta, b.line = b.evt[:0], b.meta[:0], b.line[:0]
			b.rerr = err
		}
	}
}

// process parses chunk into lines and events, appending finished events to out. It reports
// whether the stream was refused (b.err).
func (b *sseBody) process(chunk []byte) bool {
	for rest := chunk; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(b.line)+len(rest) > b.limit {
				return b.overflow()
			}
			b.line = append(b.line, rest...)
			break
		}
		if len(b.line)+i > b.limit {
			return b.overflow()
		}
		b.line = append(b.line, rest[:i+1]...)
		rest = rest[i+1:]
		raw := b.line // the line as received, with its newline
		line := bytes.TrimSuffix(raw[:len(raw)-1], []byte{'\r'})
		if len(line) == 0 {
			if b.endEvent(raw) {
				return true
			}
			b.line = b.line[:0]
			continue
		}
		if len(b.evt) == 0 {
			b.plain = true
		}
		b.evt = append(b.evt, raw...)
		b.line = b.line[:0]
		b.size += len(line)
		if b.size > b.limit {
			return b.overflow()
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, v...)
		} else {
			b.plain = b.plain && bytes.IndexByte(line, ':') >= 0
			b.meta = append(b.meta, raw...)
		}
	}
	return false
}

// endEvent handles the blank line blank that ends an event. It reports whether the stream was
// refused.
func (b *sseBody) endEvent(blank []byte) bool {
	var rep []byte
	if len(b.data) > 0 {
		var ferr error
		if rep, ferr = b.reg.deliverFrame(b.st, b.data); ferr != nil {
			b.err = ferr
			b.out = b.out[:0]
			return true
		}
	}
	if rep != nil && b.plain {
		// The SDK reads the event's other fields as received and the placeholder as its data.
		b.out = append(b.out, b.meta...)
		b.out = append(b.out, "data: "...)
		b.out = append(b.out, rep...)
		b.out = append(b.out, '\n')
	} else {
		b.out = append(b.out, b.evt...)
	}
	b.out = append(b.out, blank...)
	b.data, b.size = b.data[:0], 0
	b.evt, b.meta = b.evt[:0], b.meta[:0]
	return false
}

func (b *sseBody) overflow() bool {
	b.err = frameRefusal(b.limit)
	b.line, b.data, b.evt, b.meta, b.out = nil, nil, nil, nil, nil
	b.reg.fail(b.st, b.err)
	return true
}

func (b *sseBody) Close() error { return b.body.Close() }
