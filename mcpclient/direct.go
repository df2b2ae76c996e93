package mcpclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/wire"
	"github.com/b10x/connector-mcp/snapshot"
)

// The direct tools/call path.
//
// Over Streamable HTTP the common tools/call is sent by this package itself instead of through the
// go-sdk client: one JSON-RPC POST with exactly the body and headers the SDK writes for the same
// call (pinned by TestDirectWire*), through the same bounded http.Client the SDK transport uses
// (so the egress transport, the frame bound and the capture of the raw result apply unchanged),
// with a request id of its own ("mcpclient-N", a string: the SDK's ids are integers) so it can
// never collide with a request the SDK has in flight. The response is read as the SDK reads it
// (application/json or text/event-stream, SSE resumption with Last-Event-ID included) and every
// outcome is mapped by the same outcomeErr as the SDK path.
//
// What the SDK would do to its own connection state is mirrored: a response after which the SDK
// fails its connection (a non-transient HTTP error without a JSON-RPC error body, 404 for a known
// session, an undecodable message, an unsupported content type) marks the session broken, and
// every later request on it fails as it would on a failed SDK connection; a server-to-client
// request on the stream is answered and refused exactly as refuseServerRequests answers it; a
// cancelled call sends notifications/cancelled as the SDK does.
//
// The SDK path stays in use where the SDK keeps state a direct call could not keep coherent or
// runs caller code: stdio; an OAuth handler (its authorization flow and retry belong to the SDK);
// WatchToolListChanged (notifications must reach the SDK's handler and its tools/list cache); a
// server whose tools/list the SDK caches (ttlMs, SEP-2549), since a list_changed notification on
// a direct stream would not invalidate that cache; after the SDK itself received a
// notifications/tools/list_changed (its tool cache, from which it derives the x-mcp-header
// headers, is empty until the next ListTools), and while a ListTools is under way or after one
// failed (the SDK's cache may hold pages the snapshot does not); after a response gave the
// session a new session id the SDK does not know.

// directIDPrefix starts every id the direct path sends.
const directIDPrefix = "mcpclient-"

// directMaxRetries matches StreamableClientTransport.MaxRetries set in open: bounded SSE
// resumption without progress.
const directMaxRetries = 2

// notifyCancelledTimeout bounds the notifications/cancelled POST (the SDK's own bound).
const notifyCancelledTimeout = 5 * time.Second

// errSDKConnFailed marks a session whose direct exchange ended in what fails the SDK's
// connection; later requests fail as they would on that failed connection.
var errSDKConnFailed = errors.New("mcpclient: connection failed")

// errTerminated is the SDK's outcome for a call whose stream ended without its response.
var errTerminated = errors.New("request terminated without response")

// errErrorResponse stands for a JSON-RPC error answer recorded below the transport.
var errErrorResponse = errors.New("error response")

// marshal encodes v as the SDK's jsonrpc2 does (wire.Marshal).
var marshal = wire.Marshal

// directUsable reports whether CallTool may take the direct path now.
func (s *Session) directUsable() bool {
	if s.hc == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.noDirect && !s.sdkCaches && !s.sdkToolsCleared
}

// callBody is CallToolParams as the SDK marshals it (see marshal: the arguments compacted, not
// HTML-escaped, exactly as there; TestDirectWire pins it).
type callBody struct {
	Meta      json.RawMessage `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// requestMeta returns the per-request _meta the SDK injects at 2026-07-28 (SEP-2575): protocol
// version, client info and client capabilities (this client declares none), keys in the order
// encoding/json writes a map.
func requestMeta(proto string, impl *mcp.Implementation) (json.RawMessage, error) {
	return marshal(map[string]any{
		mcp.MetaKeyProtocolVersion:    proto,
		mcp.MetaKeyClientInfo:         impl,
		mcp.MetaKeyClientCapabilities: json.RawMessage(`{}`),
	})
}

// setHeaders sets the headers the SDK's streamable client sets on a POST of method (setMCPHeaders
// and setStandardHeaders, without an OAuth handler).
func (s *Session) setHeaders(h http.Header, method, name string) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", wire.AcceptJSONAndStream)
	s.setSessionHeaders(h)
	if method != "" && s.proto >= string(EraModern) {
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
	}
}

// setSessionHeaders sets the protocol version and session id headers (the SDK's setMCPHeaders).
func (s *Session) setSessionHeaders(h http.Header) {
	h.Set("Mcp-Protocol-Version", s.proto)
	if id := s.cs.ID(); id != "" {
		h.Set("Mcp-Session-Id", id)
	}
}

// callDirect sends one tools/call and reads its response; ctx carries the request's callState.
// It returns nil when the response was recorded as a result, otherwise an error that outcomeErr
// maps as it maps the SDK's.
func (s *Session) callDirect(ctx context.Context, name string, args json.RawMessage, desc []byte) (err error) {
	st, _ := ctx.Value(callKey{}).(*callState)
	p := callBody{Meta: s.meta, Name: name, Arguments: args}
	params, err := marshal(&p)
	if err != nil {
		return err
	}
	id := directIDPrefix + strconv.FormatUint(s.seq.Add(1), 10)
	body, err := marshal(&wire.Request{Version: "2.0", ID: id, Method: opCallTool, Params: params})
	if err != nil {
		return err
	}
	defer func() {
		// As the SDK's call: once the context has ended the call reports it (a response recorded
		// in time still wins in exchange), and notifications/cancelled is sent (best effort, off
		// the caller's path) unless the connection has failed.
		if ctx.Err() != nil {
			err = ctx.Err()
			// A connection failed by this very answer (a JSON body cut short by a refusal) may
			// still carry it: the SDK fails its connection from another goroutine.
			go s.notifyCancelled(context.WithoutCancel(ctx), id, err.Error())
		}
	}()
	link := newReqLink(ctx)
	defer link.done()
	req, err := http.NewRequestWithContext(link.ctx, http.MethodPost, s.cfg.HTTP.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	s.setHeaders(req.Header, opCallTool, name)
	if s.proto >= string(EraModern) && len(desc) > 0 {
		for k, v := range paramHeaders(desc, args) {
			req.Header.Set(k, v)
		}
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	if err := s.checkResponse(resp); err != nil {
		return err
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		if have := s.cs.ID(); have == "" {
			// The SDK would adopt it; it cannot learn it from here: the SDK path from now on.
			s.mu.Lock()
			s.noDirect = true
			s.mu.Unlock()
		} else if have != sid {
			resp.Body.Close()
			return s.fail(errors.New("mismatching session IDs"))
		}
	}
	switch wire.MediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		return s.readJSON(ctx, st, id, resp)
	case "text/event-stream":
		return s.readStream(ctx, link, st, id, resp)
	}
	resp.Body.Close()
	return s.fail(errors.New("unsupported content type"))
}

// fail marks the session broken as the SDK's connection would be, and returns the error the
// failed call reports.
func (s *Session) fail(err error) error {
	s.broken.Store(true)
	return fmt.Errorf("%w: %w", mcp.ErrConnectionClosed, err)
}

// checkResponse mirrors the SDK's checkResponse and what Write does with its error: transient
// statuses and JSON-RPC error bodies fail the call only; any other non-2xx status fails the
// connection. The body is closed when an error is returned.
func (s *Session) checkResponse(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, http.StatusTooManyRequests:
		resp.Body.Close()
		return fmt.Errorf("rejected: HTTP %d", resp.StatusCode)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m struct {
		Method string          `json:"method"`
		Error  json.RawMessage `json:"error"`
	}
	if snapshot.Unmarshal(body, &m) == nil && m.Method == "" && len(m.Error) > 0 && string(m.Error) != "null" {
		return errErrorResponse // the recorded JSON-RPC error (or the status) explains it
	}
	return s.fail(fmt.Errorf("HTTP %d", resp.StatusCode))
}

// readJSON reads an application/json answer (bounded and recorded by the transport). As the
// SDK's handleJSON, a body that cannot be read whole (a refusal of the transport included) fails
// the connection.
func (s *Session) readJSON(ctx context.Context, st *callState, id string, resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		err = s.fail(errors.New("failed to read body"))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	ours, ok := s.dispatch(ctx, id, body)
	if !ok {
		return s.fail(errors.New("failed to decode response"))
	}
	if ours {
		if done, err := s.answered(st); done {
			return err
		}
	}
	// Not the answer to this call (another id, a request or a notification): the SDK would go
	// on waiting for it, until the call's deadline.
	<-ctx.Done()
	return ctx.Err()
}

// answered reports whether the request's response has been recorded, and the call's error.
func (s *Session) answered(st *callState) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.got {
		return false, nil
	}
	if st.rpcErr {
		return true, errErrorResponse
	}
	return true, nil
}

// readStream reads a text/event-stream answer, resuming it with Last-Event-ID as the SDK does.
func (s *Session) readStream(ctx context.Context, link *reqLink, st *callState, id string, resp *http.Response) error {
	var prevLast string
	noProgress := 0
	for {
		last, delay, done, err := s.processStream(ctx, link, st, id, resp)
		if done {
			return err
		}
		if last == "" {
			return errTerminated
		}
		if last != prevLast {
			noProgress, prevLast = 0, last
		} else if noProgress++; noProgress > directMaxRetries {
			return s.fail(errors.New("exceeded retries without progress"))
		}
		resp, err = s.resume(ctx, link, last, delay)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.fail(errors.New("failed to reconnect"))
		}
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			resp.Body.Close()
			return s.fail(fmt.Errorf("HTTP %d", resp.StatusCode))
		}
	}
}

// resume reconnects an interrupted stream (the SDK's connectSSE after a first success).
func (s *Session) resume(ctx context.Context, link *reqLink, last string, delay time.Duration) (*http.Response, error) {
	var lastErr error
	for attempt := 1; attempt <= directMaxRetries; attempt++ {
		if delay <= 0 || attempt > 1 {
			delay = reconnectDelay(attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(link.ctx, http.MethodGet, s.cfg.HTTP.URL, nil)
		if err != nil {
			return nil, err
		}
		s.setSessionHeaders(req.Header)
		req.Header.Set("Last-Event-ID", last)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := s.hc.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		return resp, nil
	}
	return nil, lastErr
}

// drainGrace bounds how long the rest of a stream is drained after the call's answer.
const drainGrace = time.Second

// reqLink carries the HTTP requests of one direct call: they end with the call's context, except
// that once the answer is in, the rest of the stream may still be drained (within drainGrace) so
// the connection can be reused, as the SDK drains its streams from a goroutine of its own.
type reqLink struct {
	ctx    context.Context
	cancel context.CancelFunc
	unlink func() bool
	handed bool
}

func newReqLink(call context.Context) *reqLink {
	ctx, cancel := context.WithCancel(context.WithoutCancel(call))
	return &reqLink{ctx: ctx, cancel: cancel, unlink: context.AfterFunc(call, cancel)}
}

// answered hands the requests over to the drain: they no longer end with the call. It reports
// whether they were handed over (not when the call had already ended).
func (l *reqLink) answered() bool {
	if l.unlink() {
		l.handed = true
		time.AfterFunc(drainGrace, l.cancel)
	}
	return l.handed
}

// done ends the requests with the call unless they were handed over to the drain.
func (l *reqLink) done() {
	if !l.handed {
		l.unlink()
		l.cancel()
	}
}

// reconnectDelay is the SDK's backoff: 1 s × 1.5^(attempt-1), with full jitter.
func reconnectDelay(attempt int) time.Duration {
	d := time.Duration(float64(time.Second) * math.Pow(1.5, float64(attempt-1)))
	return d + rand.N(d) //nolint:gosec // reconnect jitter, not a secret
}

// processStream reads one SSE body. done reports that the call ended (err is its outcome);
// otherwise the stream ended without the answer and last is the last event id seen.
func (s *Session) processStream(ctx context.Context, link *reqLink, st *callState, id string, resp *http.Response) (last string, delay time.Duration, done bool, err error) {
	handedOff := false
	defer func() {
		// As the SDK's processStream, drain the rest off the caller's path so the connection can
		// be reused; the read ends with the call's context, or within drainGrace once answered.
		go func(handedOff bool) {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, int64(s.lim.MaxFrameBytes)))
			resp.Body.Close()
			if handedOff {
				link.cancel()
			}
		}(handedOff)
	}()
	events := wire.NewEventReader(resp.Body)
	for {
		ev, rerr := events.Next()
		switch {
		case errors.Is(rerr, wire.ErrMalformedEvent):
			return "", 0, true, s.fail(rerr)
		case errors.Is(rerr, io.EOF):
			return events.LastID, events.Retry, false, nil
		case rerr != nil:
			if ctx.Err() != nil {
				return "", 0, true, ctx.Err()
			}
			return events.LastID, events.Retry, false, nil // interrupted: resume if possible
		}
		if fin, ferr := s.event(ctx, st, id, ev.Name, ev.Data); fin {
			if ferr == nil {
				handedOff = link.answered()
			}
			return "", 0, true, ferr
		}
	}
}

// event handles one complete SSE event; fin reports that the call ended.
func (s *Session) event(ctx context.Context, st *callState, id string, name, data []byte) (fin bool, err error) {
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	if len(data) == 0 || (len(name) > 0 && string(name) != "message") {
		return false, nil
	}
	ours, ok := s.dispatch(ctx, id, data)
	if !ok {
		return true, s.fail(errors.New("failed to decode event"))
	}
	if ours {
		if done, err := s.answered(st); done {
			return true, err
		}
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return false, nil
}

// Methods a go-sdk client receives: requests (answered, or refused by refuseServerRequests) and
// notifications (their flags decide how a malformed one is answered).
var (
	sdkClientRequests = map[string]bool{ // method: params required
		"ping": false, "completion/complete": true, "roots/list": false,
		"sampling/createMessage": true, "elicitation/create": false,
	}
	sdkClientNotifications = map[string]bool{
		"notifications/cancelled": true, "notifications/tools/list_changed": true,
		"notifications/prompts/list_changed": true, "notifications/resources/list_changed": true,
		"notifications/resources/updated": true, "notifications/message": true,
		"notifications/progress": true, "notifications/elicitation/complete": true,
		"notifications/subscriptions/acknowledged": true,
	}
)

// dispatch reads one message as the SDK client would. ours reports that it is the response to
// the call id; a server-to-client request is answered (and refused, see refuseServerRequests)
// in the SDK's words; a notification or another response is dropped. ok is false for a message
// the SDK cannot decode.
func (s *Session) dispatch(ctx context.Context, id string, raw []byte) (ours, ok bool) {
	var m struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if snapshot.Unmarshal(raw, &m) != nil || m.Version != "2.0" {
		return false, false
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	if m.Method == "" {
		if !hasID {
			return false, false
		}
		var v any
		return snapshot.Unmarshal(m.ID, &v) == nil && v == id, true
	}
	if !hasID {
		return false, true // a notification: progress, logging, list changes have no effect on a call
	}
	resp := wire.Response{Version: "2.0", ID: m.ID}
	needsParams, known := sdkClientRequests[m.Method]
	switch {
	case sdkClientNotifications[m.Method]:
		resp.Error = &wire.Error{Code: -32600, Message: fmt.Sprintf("invalid request: unexpected id for %q", m.Method)}
	case !known:
		resp.Error = &wire.Error{Code: -32601, Message: fmt.Sprintf("method not found: %q", m.Method)}
	case needsParams && len(m.Params) == 0:
		resp.Error = &wire.Error{Code: -32600, Message: `invalid request: missing required "params"`}
	case m.Method == "ping":
		resp.Result = json.RawMessage(`{}`)
	default:
		s.reg.cancelInflight(&FeatureRefusedError{Feature: serverRequestFeature(m.Method)})
		// refuseServerRequests answers -32601, which the SDK's jsonrpc2 words as "method not found".
		resp.Error = &wire.Error{Code: -32601, Message: fmt.Sprintf("method not found: %q", m.Method)}
	}
	go s.respond(ctx, &resp) // the SDK answers from a goroutine of its own too
	return false, true
}

// respond POSTs the answer to a server-to-client request (best effort, as the SDK's).
func (s *Session) respond(ctx context.Context, resp *wire.Response) {
	body, err := marshal(resp)
	if err != nil {
		return
	}
	rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), s.lim.CallTimeout)
	defer stop()
	rctx = context.WithValue(rctx, callKey{}, (*callState)(nil))
	s.post(rctx, body, "")
}

// notifyCancelled sends notifications/cancelled for the request id, as the SDK does when a
// call's context ends first.
func (s *Session) notifyCancelled(ctx context.Context, id, reason string) {
	params, err := marshal(&struct {
		Reason    string `json:"reason,omitempty"`
		RequestID string `json:"requestId"`
	}{reason, id})
	if err != nil {
		return
	}
	body, err := marshal(&wire.Request{Version: "2.0", Method: "notifications/cancelled", Params: params})
	if err != nil {
		return
	}
	nctx, stop := context.WithTimeout(ctx, notifyCancelledTimeout)
	defer stop()
	nctx = context.WithValue(nctx, callKey{}, (*callState)(nil))
	s.post(nctx, body, "notifications/cancelled")
}

// post sends one message that expects no answer (202), draining what comes back within bounds.
func (s *Session) post(ctx context.Context, body []byte, method string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.HTTP.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	s.setHeaders(req.Header, method, "")
	resp, err := s.hc.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, int64(s.lim.MaxFrameBytes)))
	resp.Body.Close()
}

// headerProperty is the part of an input schema the SDK reads for x-mcp-header (SEP-2243).
type headerProperty struct {
	Type       string                    `json:"type"`
	XMCPHeader json.RawMessage           `json:"x-mcp-header,omitempty"`
	Properties map[string]headerProperty `json:"properties,omitempty"`
}

type headerBinding struct {
	path   []string
	header string
}

// paramHeaders returns the Mcp-Param-* headers the SDK derives from the tool's x-mcp-header
// annotations and the call's arguments (its generateParamHeaders). The annotation key may be
// spelled with \u escapes, as the SDK decodes it (sdkNeedsTool).
func paramHeaders(desc, args []byte) map[string]string {
	if !sdkNeedsTool(desc) {
		return nil
	}
	var d struct {
		InputSchema headerProperty `json:"inputSchema"`
	}
	if snapshot.Unmarshal(desc, &d) != nil || len(d.InputSchema.Properties) == 0 {
		return nil
	}
	bindings := collectBindings(d.InputSchema.Properties, nil, nil)
	if len(bindings) == 0 {
		return nil
	}
	var a map[string]json.RawMessage
	if snapshot.Unmarshal(args, &a) != nil || a == nil {
		return nil
	}
	out := map[string]string{}
	for _, b := range bindings {
		raw, ok := lookupArgument(a, b.path)
		if !ok || string(raw) == "null" {
			continue
		}
		v, ok := headerValue(raw)
		if !ok {
			continue
		}
		out["Mcp-Param-"+b.header] = v
	}
	return out
}

func collectBindings(props map[string]headerProperty, prefix []string, out []headerBinding) []headerBinding {
	for name, p := range props {
		path := append(append(make([]string, 0, len(prefix)+1), prefix...), name)
		var h string
		if snapshot.Unmarshal(p.XMCPHeader, &h) == nil && h != "" {
			out = append(out, headerBinding{path: path, header: h})
		}
		if len(p.Properties) > 0 {
			out = collectBindings(p.Properties, path, out)
		}
	}
	return out
}

func lookupArgument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	if !ok {
		return nil, false
	}
	for _, part := range path[1:] {
		var obj map[string]json.RawMessage
		if snapshot.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// headerValue encodes a primitive argument as the SDK does: strings and booleans as text, safe
// integers in decimal, anything else skipped; a value that is not plain visible ASCII (or looks
// like the base64 wrapper) is sent as =?base64?...?=.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if snapshot.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case int64: // snapshot.Unmarshal keeps integers as int64; the SDK's float64 rule applies
		if x < -maxSafeInteger || x > maxSafeInteger {
			return "", false
		}
		s = strconv.FormatInt(x, 10)
	case float64:
		const maxSafe = maxSafeInteger
		if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) || x < -maxSafe || x > maxSafe {
			return "", false
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		return "", false
	}
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
	}
	return s, true
}

// maxSafeInteger is the largest integer a JSON number carries exactly as an IEEE 754 double.
const maxSafeInteger = 1<<53 - 1

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7E {
			return true
		}
	}
	return strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=")
}
