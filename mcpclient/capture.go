package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	rpcErr  bool
	rpcCode int64
	rpcData json.RawMessage
	status  int
	// scopes is set (possibly empty) when a 403 carried an insufficient_scope challenge.
	scopes []string
	// insufficientScope records that challenge.
	insufficientScope bool
}

func (st *callState) deliver(result json.RawMessage, isErr bool, code int64, data json.RawMessage) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.got {
		return
	}
	st.got = true
	if isErr {
		st.rpcErr, st.rpcCode, st.rpcData = true, code, bytes.Clone(data)
		return
	}
	st.result = bytes.Clone(result)
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

// deliverFrame refuses a frame that is not JSON and records the responses it carries.
func (r *registry) deliverFrame(st *callState, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	// The whole frame is checked as the snapshot scanner checks a descriptor (grammar, UTF-8,
	// duplicate members at any depth), so the exact-case reading below sees the members the SDK
	// read, and a hostile frame is refused by name for the request it answers. A single message
	// is checked and split into its members in the same scan.
	var err error
	if raw[0] == '{' {
		var ms []snapshot.Member
		if ms, err = snapshot.Members(raw); err == nil {
			r.deliverMembers(ms)
			return nil
		}
	} else if err = snapshot.Validate(raw); err == nil {
		r.deliverRaw(raw)
		return nil
	}
	name, reason := snapshot.RefusalInvalidJSON, snapshot.ErrInvalidJSON
	var sr *snapshot.RefusalError
	if errors.As(err, &sr) {
		name, reason = sr.Name, sr.Err
	}
	rerr := refuse(name, "", 0, reason)
	r.fail(st, rerr)
	return rerr
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
// message without an id, or a member of the wrong type is not recorded.
func (r *registry) deliverMembers(ms []snapshot.Member) {
	var id, result json.RawMessage
	var rpcErr *rpcError
	for _, m := range ms {
		switch m.Name {
		case "id":
			id = m.Value
		case "method":
			var method string
			if snapshot.Unmarshal(m.Value, &method) != nil || method != "" {
				return
			}
		case "result":
			result = m.Value
		case "error":
			if snapshot.Unmarshal(m.Value, &rpcErr) != nil {
				return
			}
		}
	}
	if len(id) == 0 {
		return
	}
	var idv any
	if json.Unmarshal(id, &idv) != nil {
		return
	}
	st := r.lookup(idKey(idv))
	if st == nil {
		return
	}
	if rpcErr != nil {
		st.deliver(nil, true, rpcErr.Code, rpcErr.Data)
		return
	}
	st.deliver(result, false, 0, nil)
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
				st.deliver(nil, true, werr.Code, werr.Data)
			case resp.Error != nil:
				st.deliver(nil, true, 0, nil)
			default:
				st.deliver(resp.Result, false, 0, nil)
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
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
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

// jsonBody bounds a JSON response body and records the response it carries at EOF.
type jsonBody struct {
	body  io.ReadCloser
	probe *http.Request // a guarded server/discover (see probeBodyFailed)
	reg   *registry
	st    *callState
	limit int
	buf   []byte
	err   error
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	probeBodyFailed(b.probe, b.st, err)
	if len(b.buf)+n > b.limit {
		b.err = frameRefusal(b.limit)
		b.reg.fail(b.st, b.err)
		return 0, b.err
	}
	b.buf = append(b.buf, p[:n]...)
	if errors.Is(err, io.EOF) {
		if ferr := b.reg.deliverFrame(b.st, b.buf); ferr != nil {
			b.err = ferr
			return 0, ferr
		}
		b.buf = nil
	}
	return n, err
}

func (b *jsonBody) Close() error { return b.body.Close() }

// sseBody bounds each server-sent event (and each line) and records the responses it carries,
// before the SDK sees the bytes that complete the event.
type sseBody struct {
	body  io.ReadCloser
	probe *http.Request // a guarded server/discover (see probeBodyFailed)
	reg   *registry
	st    *callState
	limit int
	line  []byte
	data  []byte
	size  int
	err   error
}

func (b *sseBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	probeBodyFailed(b.probe, b.st, err)
	for rest := p[:n]; len(rest) > 0; {
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
		line := rest[:i] // a whole line within p is read where it is, not copied
		if len(b.line) > 0 {
			b.line = append(b.line, line...)
			line = b.line
		}
		rest = rest[i+1:]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		b.line = b.line[:0]
		if len(line) == 0 {
			if len(b.data) > 0 {
				if ferr := b.reg.deliverFrame(b.st, b.data); ferr != nil {
					b.err = ferr
					return 0, ferr
				}
			}
			b.data, b.size = b.data[:0], 0
			continue
		}
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
		}
	}
	return n, err
}

func (b *sseBody) overflow() (int, error) {
	b.err = frameRefusal(b.limit)
	b.line, b.data = nil, nil
	b.reg.fail(b.st, b.err)
	return 0, b.err
}

func (b *sseBody) Close() error { return b.body.Close() }
