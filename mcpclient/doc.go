// Package mcpclient is the tools-only MCP client foundation of connector-mcp, on go-sdk v1.8.0.
//
// It connects to a server over stdio (argv only, exact child environment, bounded stderr) or
// Streamable HTTP (https except loopback, any injected *http.Client, optional OAuth handler),
// negotiates the protocol era (server/discover at 2026-07-28 with fallback to initialize at
// 2025-11-25 on a recognised non-modern answer only, own probe deadline, a fresh process for stdio
// servers that ignore or exit on the probe; over HTTP a transport failure of the probe is an error,
// never a legacy verdict; era cached per configuration), freezes tools/list into an immutable snapshot.ToolSnapshot of the
// raw descriptors as received, and calls tools returning the raw result JSON.
//
// MCP is transport, not authority: the client advertises no capabilities, refuses every
// server-to-client request and multi-round or task results by feature name, bounds every frame,
// page, descriptor, argument, result and deadline with a named refusal (*RefusalError,
// *FeatureRefusedError), and never puts bodies, headers, tokens, session ids or server prose into
// errors.
//
// Raw JSON is captured below the SDK (at the stdio connection, which this package owns, and at the
// HTTP RoundTripper), because the SDK decodes into typed structs and rejects unknown content.
// Every server frame is read by the snapshot package's strict JSON scanner (grammar, valid UTF-8,
// unique member names at every depth, exact-case names), which is stricter than encoding/json
// and go-sdk on purpose: a hostile frame the SDK would read one way and this package another is
// refused by name instead: a tools/list page is split into its descriptors and a tools/call
// result into its members by that scanner (snapshot.MembersAndElements, snapshot.Members), in the
// same strict pass. The protocol-level wire pieces (the bounded JSON and SSE bodies below the SDK,
// the SSE event reader and the JSON-RPC envelope of the direct tools/call path) are shared with
// the gateway in internal/wire; the capture registry that records each request's raw answer, and
// everything that mirrors go-sdk's session state, stay here.
//
// See docs/mcpclient.md.
//
// Over HTTP, a request of a call whose context holds an OpenTelemetry span carries its W3C trace
// context (traceparent, tracestate) when the process installed a propagator
// (otel.SetTextMapPropagator): an upstream that traces joins the caller's trace.
package mcpclient
