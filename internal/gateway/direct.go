package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/wire"
	"github.com/b10x/connector-mcp/snapshot"
)

// The protocol revisions whose tools/call the gateway answers directly.
const (
	protocolModern = wire.ProtocolModern
	protocolLegacy = wire.ProtocolLegacy
)

// directCall is a tools/call request the gateway answers without the go-sdk server.
type directCall struct {
	id     json.RawMessage
	modern bool
	params mcp.CallToolParamsRaw
}

// serveDirect answers a tools/call request on a deployment route below the go-sdk server when
// the request is exactly the common shape: one JSON-RPC request (no batch), method tools/call,
// an integer or plain string id, params of only name (a non-empty string), arguments (an object)
// and _meta, and an MCP-Protocol-Version header of 2026-07-28 (with the _meta triple and
// Mcp-Method/Mcp-Name headers that match the body) or 2025-11-25 (no _meta protocol version).
// The answer is the one the go-sdk server writes for the same request (status, headers, JSON-RPC
// envelope); the result member is the upstream's result JSON, byte for byte. The call itself
// enters the same path as on the go-sdk route (callTool: authorization, exposure, schema, egress,
// drift).
//
// It returns false, with r's body restored, for any other request: the go-sdk server answers
// it, refusals and protocol errors included. Parsing is strict (snapshot.Members: unique member
// names, valid UTF-8, exact-case names), so the fast path never reads a request differently from
// the way the schema check and the upstream read the arguments.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, info *reqInfo) bool {
	version := r.Header.Get("Mcp-Protocol-Version")
	if info.route.meta() || r.Method != http.MethodPost || (version != protocolModern && version != protocolLegacy) ||
		len(r.Header.Values("Last-Event-ID")) > 0 || !wire.IsJSON(r.Header.Get("Content-Type")) ||
		!wire.AcceptsJSONAndStream(r.Header.Values("Accept")) || !g.hostAllowedBySDK(r) {
		return false
	}
	body := info.body
	if body == nil {
		var ok bool
		if body, ok = g.readBody(w, r); !ok {
			return true
		}
	}
	call, ok := parseDirectCall(body, version)
	if !ok || (call.modern && (r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != call.params.Name)) {
		return false
	}
	g.cfg.Metrics.DirectCalls.Inc()
	res, err := g.handleCall(r.Context(), info, &call.params)
	writeDirect(w, call, res, err)
	return true
}

// handleCall answers one tools/call (either path) and records its metrics.
func (g *Gateway) handleCall(ctx context.Context, info *reqInfo, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	start := time.Now()
	res, err := g.callTool(ctx, info, p)
	o := outcome(err)
	info.trail.setOutcome("tools/call", o)
	err = withRequestID(err, info.trail.requestID())
	g.cfg.Metrics.Requests.WithLabelValues(info.route.label(), o).Inc()
	g.cfg.Metrics.Calls.WithLabelValues(info.route.label(), o).Inc()
	g.cfg.Metrics.CallDuration.WithLabelValues(info.route.label()).Observe(time.Since(start).Seconds())
	return res, err
}

// parseDirectCall reads body as a tools/call request of the given protocol revision
// (wire.ParseCall, then the _meta the go-sdk server accepts for it); false for anything but the
// shape serveDirect takes.
func parseDirectCall(body []byte, version string) (*directCall, bool) {
	c, ok := wire.ParseCall(body)
	if !ok || !metaFits(c.Meta, version) {
		return nil, false
	}
	dc := &directCall{id: c.ID, modern: version == protocolModern,
		params: mcp.CallToolParamsRaw{Name: c.Name, Arguments: c.Arguments}}
	if c.Meta != nil {
		// Only the approval members are kept (the call path reads nothing else of _meta); they
		// are decoded as the go-sdk server would decode the whole _meta.
		ms, err := snapshot.Members(c.Meta)
		if err != nil {
			return nil, false
		}
		for _, m := range ms {
			if m.Name != apiv1.ApprovalMetaKey && m.Name != ApprovalTTLMetaKey {
				continue
			}
			var v any
			if json.Unmarshal(m.Value, &v) != nil {
				return nil, false
			}
			if dc.params.Meta == nil {
				dc.params.Meta = mcp.Meta{}
			}
			dc.params.Meta[m.Name] = v
		}
	}
	return dc, true
}

// metaFits reports whether _meta is what the go-sdk server accepts for version without a
// refusal: for 2026-07-28 the protocol version equal to the header, client capabilities and
// optional client info that decode; for 2025-11-25 no protocol version in _meta at all.
func metaFits(meta json.RawMessage, version string) bool {
	if meta == nil {
		return version == protocolLegacy
	}
	ms, err := snapshot.Members(meta)
	if err != nil {
		return false
	}
	var pv, caps, ci json.RawMessage
	for _, m := range ms {
		switch m.Name {
		case mcp.MetaKeyProtocolVersion:
			pv = m.Value
		case mcp.MetaKeyClientCapabilities:
			caps = m.Value
		case mcp.MetaKeyClientInfo:
			ci = m.Value
		}
	}
	if version == protocolLegacy {
		return pv == nil
	}
	var v string
	if pv == nil || pv[0] != '"' || json.Unmarshal(pv, &v) != nil || v != version {
		return false
	}
	if caps == nil || caps[0] != '{' || (ci != nil && ci[0] != '{') {
		return false
	}
	return clientMetaDecodes(caps, ci)
}

// clientMetaCache remembers which (client capabilities, client info) pairs decode: a client sends
// the same bytes on every call, and decoding them is most of the cost of parsing a request.
// Pairs longer than clientMetaCacheKeyBytes are not remembered; the cache is emptied when it holds
// clientMetaCacheEntries pairs.
var clientMetaCache struct {
	sync.Mutex
	m map[string]bool
}

const (
	clientMetaCacheKeyBytes = 512
	clientMetaCacheEntries  = 256
)

// clientMetaDecodes reports whether caps decodes as the client capabilities and ci (nil: absent)
// as the client info of a 2026-07-28 request, as the go-sdk server decodes them (exact-case
// member names, types checked).
func clientMetaDecodes(caps, ci json.RawMessage) bool {
	key := ""
	if len(caps)+len(ci) < clientMetaCacheKeyBytes {
		key = string(caps) + "\x00" + string(ci)
		clientMetaCache.Lock()
		ok, hit := clientMetaCache.m[key]
		clientMetaCache.Unlock()
		if hit {
			return ok
		}
	}
	// go-sdk decodes the 2026-07-28 capabilities as ClientCapabilities with "roots" a pointer to
	// {listChanged}; the same shape here, without naming its deprecated type.
	var c struct {
		mcp.ClientCapabilities
		Roots *struct {
			ListChanged bool `json:"listChanged,omitempty"`
		} `json:"roots,omitempty"`
	}
	var impl mcp.Implementation
	ok := snapshot.Unmarshal(caps, &c) == nil && (ci == nil || snapshot.Unmarshal(ci, &impl) == nil)
	if key != "" {
		clientMetaCache.Lock()
		if clientMetaCache.m == nil || len(clientMetaCache.m) >= clientMetaCacheEntries {
			clientMetaCache.m = make(map[string]bool)
		}
		clientMetaCache.m[key] = ok
		clientMetaCache.Unlock()
	}
	return ok
}

// writeDirect writes the JSON-RPC response to call as the go-sdk server does in JSON-response
// mode: 200, or for a 2026-07-28 request a protocol-level status (404 method not found, 400
// invalid params) for an error.
func writeDirect(w http.ResponseWriter, call *directCall, res mcp.Result, err error) {
	var b bytes.Buffer
	status := http.StatusOK
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(call.id)
	if rr, ok := res.(*rawResult); err == nil && ok {
		b.WriteString(`,"result":`)
		b.Write(rr.raw)
	} else {
		var we *jsonrpc.Error
		if err == nil || !errors.As(err, &we) {
			we = &jsonrpc.Error{Code: CodeRefused, Message: "refused: " + RefusalCallFailed}
		}
		if call.modern {
			switch we.Code {
			case jsonrpc.CodeMethodNotFound:
				status = http.StatusNotFound
			case jsonrpc.CodeInvalidParams:
				status = http.StatusBadRequest
			}
		}
		e, _ := json.Marshal(we)
		b.WriteString(`,"error":`)
		b.Write(e)
	}
	b.WriteByte('}')
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// hostAllowedBySDK reports whether go-sdk's DNS-rebinding protection (on when AllowedHosts is
// empty) admits r: a request arriving on a loopback address must name a loopback host. When in
// doubt it answers false, and the go-sdk server judges the request.
func (g *Gateway) hostAllowedBySDK(r *http.Request) bool {
	if len(g.cfg.AllowedHosts) > 0 {
		return true // checked in serve; the SDK's protection is off
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil || !loopbackAddr(la.String()) {
		return ok && la != nil
	}
	return loopbackAddr(r.Host)
}

// loopbackAddr reports whether addr names a loopback host, exactly as go-sdk's DNS-rebinding
// protection judges it: "localhost" or a loopback IP, with or without a port.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
