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
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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
	// clock is the operation's deadline, paused while an authorization runs (timedAuthorizer).
	clock *opClock
	// guardDiscover (HTTP connect that may probe): a server/discover exchange that gets no
	// recognised answer ends the whole connect with a transport error, so the SDK's built-in
	// fallback cannot turn a transport failure into a legacy verdict.
	guardDiscover bool

	mu      sync.Mutex
	got     bool
	result  json.RawMessage
	scanned bool // result is part of a frame that passed the strict scan (snapshot.Members/Validate)
	// page is the split of a tools/list result (readPage, its descriptors sub-slices of result),
	// made once when the result was recorded.
	page    *listPage
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
	if err != nil {
		return nil
	}
	return pg.sdkList(raw)
}

// sdkList is sdkListResult of raw, the page pg was split from.
func (pg *listPage) sdkList(raw []byte) []byte {
	if !pg.plainTools {
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
	return st.sdkResult()
}

// sdkResult returns what the SDK is handed in place of the result just recorded in st (see the
// function sdkResult). A tools/list page is split once, here, and the split kept in st.page for
// ListTools.
func (st *callState) sdkResult() []byte {
	st.mu.Lock()
	op, result := st.op, st.result
	st.mu.Unlock()
	if op != opListTools || len(result) == 0 {
		return sdkResult(op, result)
	}
	pg, err := readPage(result)
	if err != nil {
		return nil
	}
	st.mu.Lock()
	st.page = &pg
	st.mu.Unlock()
	return pg.sdkList(result)
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
					if rep := st.sdkResult(); rep != nil {
						resp.Result = rep
					}
				}
			}
		}
	}
	return msg, err
}

// withTraceContext returns req carrying, as W3C trace-context headers (traceparent, tracestate),
// the span of its context, when there is one and the process installed a propagator
// (otel.SetTextMapPropagator); else req itself. An upstream that traces joins the caller's trace.
func withTraceContext(req *http.Request) *http.Request {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return req
	}
	out := req.Clone(req.Context())
	otel.GetTextMapPropagator().Inject(req.Context(), propagation.HeaderCarrier(out.Header))
	return out
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
	req = withTraceContext(req)
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
		resp.Body = &wire.ErrorBody{Body: resp.Body, Limit: int64(t.frame)}
		resp.ContentLength = -1
		return resp, nil
	}
	c := &capture{reg: t.reg, st: st, probe: probeReq(discover, st, req)}
	if ct == "text/event-stream" {
		resp.Body = wire.NewSSEBody(resp.Body, t.frame, c)
	} else {
		resp.Body = wire.NewJSONBody(resp.Body, t.frame, c)
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

func frameRefusal(limit int) *RefusalError {
	return refuse(RefusalFrameTooLarge, "", int64(limit), ErrFrameTooLarge)
}

// capture is what the bounded bodies of one response (wire.JSONBody, wire.SSEBody) report to:
// the registry records the responses of each frame for the request st (nil: the session's own
// traffic), an overflow of the frame bound fails st (or the session), and the body of a guarded
// server/discover (probe) that breaks ends the connect.
type capture struct {
	reg   *registry
	st    *callState
	probe *http.Request
}

// Frame refuses a frame that is not JSON and records the responses it carries (deliverFrame).
func (c *capture) Frame(raw []byte) ([]byte, error) { return c.reg.deliverFrame(c.st, raw) }

// TooLarge fails the request (or the session) with frame_too_large.
func (c *capture) TooLarge(limit int) error {
	err := frameRefusal(limit)
	c.reg.fail(c.st, err)
	return err
}

// Broken ends a guarded connect whose answer was cut short (probeBodyFailed).
func (c *capture) Broken(err error) { probeBodyFailed(c.probe, c.st, err) }
