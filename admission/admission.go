// Package admission admits, for one run of a local consumer (an agent harness, mcpctl serve), the
// intersection of a frozen live snapshot and a local authority document: the reviewed profile
// document a pack carries (api/v1 ProfileDocument), read from a file or from a pack verified by
// digest.
//
// [Admit] checks the document with the ocipack rules (fields and contract, the one-to-one mapping,
// every digest reconstructed from the recorded descriptors) and returns a [Set]: only the tools
// present in both with the same descriptor digest (the RFC 8785 canonical form of the whole
// descriptor, byte for byte), each with its reviewed local facts (operation reference as its
// name, title, description, effect). Every other tool is refused by a stable name: drift
// (tool_added, tool_removed, tool_changed, protocol_changed), an effect that is not reviewed
// (unreviewed, invalid_effect), an input schema that does not compile (invalid_schema), or an
// explicit subsetting of the document (not_exposed). A tool the document does not list never
// appears. The classified diff of a drift is the one package drift builds for the operator's
// review.
//
// A Set is fixed for the run: nothing is ever added to it and nothing in it changes. A
// notifications/tools/list_changed is answered with [Set.Observe] on a fresh listing: it returns a
// [Candidate] (the new snapshot and its classified diff, for review) and withdraws, for the rest
// of the run, every admitted tool the new listing changed or removed (live_drift). [Set.Call]
// checks arguments against the frozen input schema (package argschema, the rules of the operator's
// invocation surface) and returns the upstream result exactly as received.
//
// Errors carry refusal names, tool names (clipped) and digests: never arguments, results, tokens
// or server prose. The package depends on no Kubernetes client, registry or sigstore library.
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/argschema"
	"github.com/b10x/connector-mcp/drift"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// Refusal names of this package. Effect refusals reuse ocipack's names (ocipack.RefusalUnreviewed,
// ocipack.RefusalInvalidEffect); a document refused as a whole keeps its ocipack refusal
// (ocipack.RefusalWrongContract, ...).
const (
	// RefusalToolAdded: the live server lists a tool the authority document does not record.
	RefusalToolAdded = "tool_added"
	// RefusalToolRemoved: a recorded tool is not listed by the live server.
	RefusalToolRemoved = "tool_removed"
	// RefusalToolChanged: the live descriptor's digest differs from the recorded one.
	RefusalToolChanged = "tool_changed"
	// RefusalProtocolChanged: the live protocol revision is not the recorded one; no tool is
	// admitted.
	RefusalProtocolChanged = "protocol_changed"
	// RefusalNotExposed: the authority lists the operation as not exposed.
	RefusalNotExposed = "not_exposed"
	// RefusalInvalidSchema: the recorded input schema is missing or does not compile.
	RefusalInvalidSchema = "invalid_schema"
	// RefusalUnknownOperation: Authority.NotExposed names no operation of the document.
	RefusalUnknownOperation = "unknown_operation"
	// RefusalInvalidSnapshot: the live snapshot is missing or its digests do not reconstruct.
	RefusalInvalidSnapshot = "invalid_snapshot"
	// RefusalNotAdmitted: a call names no admitted tool.
	RefusalNotAdmitted = "not_admitted"
	// RefusalLiveDrift: a later listing during the run changed or removed the tool.
	RefusalLiveDrift = "live_drift"
	// RefusalInvalidArguments: the arguments are not one JSON object or violate the frozen input
	// schema (argschema.RefusalInvalidArguments).
	RefusalInvalidArguments = argschema.RefusalInvalidArguments
)

// Sentinels, matched with errors.Is through an *Error.
var (
	// ErrInvalidAuthority means the authority document is missing or fails the ocipack checks.
	ErrInvalidAuthority = errors.New("invalid authority document")
	// ErrInvalidSnapshot means the live snapshot is missing or does not verify.
	ErrInvalidSnapshot = errors.New("invalid live snapshot")
	// ErrUnknownOperation means Authority.NotExposed names no operation of the document.
	ErrUnknownOperation = errors.New("unknown operation")
	// ErrNotAdmitted means a call names no admitted tool.
	ErrNotAdmitted = errors.New("tool not admitted")
	// ErrLiveDrift means the tool changed or disappeared during the run.
	ErrLiveDrift = errors.New("tool drifted during the run")
)

// Error is a named refusal of this package. It never carries arguments, results or server prose.
type Error struct {
	// Name is the stable refusal name, one of the RefusalX constants (or ocipack's for a document).
	Name string
	// Tool is the tool concerned (local name for calls), when known.
	Tool string
	// Err is the reason; errors.Is matches the sentinels through it.
	Err error
}

// Error returns the refusal name, the clipped tool name and the reason.
func (e *Error) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("%s: tool %q: %v", e.Name, refusal.Clip(e.Tool, 128), e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Name, e.Err)
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// Refusal returns the stable refusal name.
func (e *Error) Refusal() string { return e.Name }

var _ refusal.Named = (*Error)(nil)

// Authority is the local authority document of a run and its explicit subsetting.
type Authority struct {
	// Profile is the reviewed profile document (from a file or a verified pack). Required.
	Profile *apiv1.ProfileDocument
	// NotExposed lists operation references (operations[].operationRef) that this run does not
	// expose: they are refused not_exposed even when they match. Each must name an operation.
	NotExposed []string
}

// Tool is one admitted tool: its reviewed local facts and its frozen descriptor facts.
type Tool struct {
	// Name is the local name callers use: the reviewed operation reference.
	Name string
	// RemoteName is the tool name on the server.
	RemoteName string
	// Title is the reviewed title.
	Title string
	// Description is the reviewed description.
	Description string
	// Effect is the reviewed effect: read, write or destructive.
	Effect apiv1.Effect
	// Digest is the frozen descriptor digest.
	Digest string
	// InputSchema is the frozen input schema, byte for byte.
	InputSchema json.RawMessage

	schema *argschema.Schema
}

// Hints are the MCP tool annotations derived from a reviewed effect, never from the server's own.
type Hints struct {
	// ReadOnly is true for EffectRead.
	ReadOnly bool
	// Destructive is true for EffectDestructive.
	Destructive bool
}

// Hints returns the annotations derived from the tool's reviewed effect.
func (t Tool) Hints() Hints {
	return Hints{ReadOnly: t.Effect == apiv1.EffectRead, Destructive: t.Effect == apiv1.EffectDestructive}
}

// Refused is one tool that is not admitted, and why.
type Refused struct {
	// Tool is the remote tool name.
	Tool string `json:"tool"`
	// Operation is the operation reference mapping it, when the document maps it.
	Operation string `json:"operation,omitempty"`
	// Refusal is the stable refusal name, e.g. "tool_changed".
	Refusal string `json:"refusal"`
}

// Set is the admitted set of one run. Its tools never change; Observe can only withdraw them.
// It is safe for concurrent use.
type Set struct {
	profileDigest string
	recorded      *snapshot.ToolSnapshot
	live          *snapshot.ToolSnapshot
	report        *drift.Report
	tools         []Tool
	byName        map[string]*Tool
	refused       []Refused

	mu        sync.Mutex
	withdrawn map[string]string // local name -> refusal name
}

// Admit checks auth against the ocipack rules and returns the admitted set of live, the frozen
// snapshot of this run's upstream. The error is an *Error: ErrInvalidAuthority (wrapping the
// ocipack refusal, whose name it keeps, e.g. wrong_contract or digest_mismatch),
// ErrInvalidSnapshot or ErrUnknownOperation. Drift is not an error: the refused tools and the
// classified diff are in the Set (see Set.Drifted).
func Admit(live *snapshot.ToolSnapshot, auth Authority) (*Set, error) {
	doc := auth.Profile
	if doc == nil {
		return nil, &Error{Name: ocipack.RefusalInvalidProfile, Err: ErrInvalidAuthority}
	}
	for _, check := range []ocipack.Check{ocipack.ValidateFields, ocipack.ValidateMapping} {
		if err := check(doc); err != nil {
			return nil, &Error{Name: refusal.Name(err), Err: fmt.Errorf("%w: %w", ErrInvalidAuthority, err)}
		}
	}
	recorded, err := ocipack.SnapshotOf(doc)
	if err != nil {
		return nil, &Error{Name: refusal.Name(err), Err: fmt.Errorf("%w: %w", ErrInvalidAuthority, err)}
	}
	if live == nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: ErrInvalidSnapshot}
	}
	if err := live.Verify(); err != nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)}
	}
	hidden := make(map[string]bool, len(auth.NotExposed))
	ops := make(map[string]apiv1.OperationMapping, len(doc.Operations))
	refs := make(map[string]bool, len(doc.Operations))
	for _, o := range doc.Operations {
		ops[o.RemoteName] = o
		refs[o.OperationRef] = true
	}
	for _, ref := range auth.NotExposed {
		if !refs[ref] {
			return nil, &Error{Name: RefusalUnknownOperation, Tool: ref, Err: ErrUnknownOperation}
		}
		hidden[ref] = true
	}
	report, err := drift.Compare(recorded, live)
	if err != nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)}
	}
	profileDigest, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return nil, &Error{Name: refusal.Name(err), Err: fmt.Errorf("%w: %w", ErrInvalidAuthority, err)}
	}
	s := &Set{profileDigest: profileDigest, recorded: recorded, live: live, report: report,
		byName: map[string]*Tool{}, withdrawn: map[string]string{}}
	protocolChanged := recorded.ProtocolVersion != live.ProtocolVersion
	for _, rt := range recorded.Tools {
		o := ops[rt.Name]
		lt, ok := live.Lookup(rt.Name)
		name := ""
		switch {
		case protocolChanged:
			name = RefusalProtocolChanged
		case !ok:
			name = RefusalToolRemoved
		case lt.Digest != rt.Digest:
			name = RefusalToolChanged
		case o.Effect == apiv1.EffectUnreviewed:
			name = ocipack.RefusalUnreviewed
		case o.Effect != apiv1.EffectRead && o.Effect != apiv1.EffectWrite && o.Effect != apiv1.EffectDestructive:
			name = ocipack.RefusalInvalidEffect
		case hidden[o.OperationRef]:
			name = RefusalNotExposed
		}
		var t Tool
		if name == "" {
			t, name = admitTool(rt, o)
		}
		if name != "" {
			s.refused = append(s.refused, Refused{Tool: rt.Name, Operation: o.OperationRef, Refusal: name})
			continue
		}
		s.tools = append(s.tools, t)
	}
	for _, lt := range live.Tools {
		if _, ok := recorded.Lookup(lt.Name); !ok {
			s.refused = append(s.refused, Refused{Tool: lt.Name, Refusal: RefusalToolAdded})
		}
	}
	sort.Slice(s.tools, func(i, j int) bool { return s.tools[i].Name < s.tools[j].Name })
	sort.Slice(s.refused, func(i, j int) bool { return s.refused[i].Tool < s.refused[j].Tool })
	for i := range s.tools {
		s.byName[s.tools[i].Name] = &s.tools[i]
	}
	return s, nil
}

// admitTool builds the admitted tool of a matching recorded descriptor, or names its refusal.
func admitTool(rt snapshot.Tool, o apiv1.OperationMapping) (Tool, string) {
	var d struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	// Exact-case decoding: an "InputSchema" variant next to "inputSchema" is not the schema.
	if err := snapshot.Unmarshal(rt.Descriptor, &d); err != nil || len(d.InputSchema) == 0 {
		return Tool{}, RefusalInvalidSchema
	}
	sch, err := argschema.Compile(d.InputSchema)
	if err != nil {
		return Tool{}, RefusalInvalidSchema
	}
	return Tool{Name: o.OperationRef, RemoteName: rt.Name, Title: o.Title, Description: o.Description,
		Effect: o.Effect, Digest: rt.Digest, InputSchema: d.InputSchema, schema: sch}, ""
}

// Tools returns the admitted tools sorted by local name (a copy: the set does not change).
// Withdrawn tools stay listed; Call refuses them.
func (s *Set) Tools() []Tool { return append([]Tool(nil), s.tools...) }

// Lookup returns the admitted tool with local name name.
func (s *Set) Lookup(name string) (Tool, bool) {
	t, ok := s.byName[name]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// Refused returns every recorded or live tool that is not admitted, sorted by remote name.
func (s *Set) Refused() []Refused { return append([]Refused(nil), s.refused...) }

// Report returns the classified diff from the recorded snapshot to the live one (empty when the
// server is exactly the reviewed one).
func (s *Set) Report() *drift.Report { return s.report }

// Drifted reports whether the live snapshot differs from the recorded one in any way.
func (s *Set) Drifted() bool { return !s.report.Empty() }

// Complete reports whether every tool the document records is admitted, except those refused
// not_exposed, and the server lists nothing more: no drift, no unreviewed effect, no invalid
// schema.
func (s *Set) Complete() bool {
	for _, r := range s.refused {
		if r.Refusal != RefusalNotExposed {
			return false
		}
	}
	return true
}

// SnapshotDigest returns the reviewed snapshot digest the set was admitted against.
func (s *Set) SnapshotDigest() string { return s.recorded.Digest }

// LiveDigest returns the digest of the live snapshot at admission.
func (s *Set) LiveDigest() string { return s.live.Digest }

// ProfileDigest returns the digest of the authority document (ocipack.ProfileDigest).
func (s *Set) ProfileDigest() string { return s.profileDigest }

// Candidate is what a later listing during the run produced: a snapshot for review, never a
// change of the admitted set.
type Candidate struct {
	// Snapshot is the new live snapshot.
	Snapshot *snapshot.ToolSnapshot
	// Report is the classified diff from the recorded (reviewed) snapshot to Snapshot.
	Report *drift.Report
	// Withdrawn lists the local names of admitted tools this listing changed or removed, sorted.
	// They stay refused live_drift for the rest of the run.
	Withdrawn []string
}

// Observe takes a fresh listing of the upstream (after notifications/tools/list_changed, or any
// re-list) and returns it as a Candidate with its classified diff. Every admitted tool whose
// descriptor the listing changed or removed (or every tool, if the protocol changed) is withdrawn
// for the rest of the run, even if a later listing restores it. Nothing is ever added: a new tool
// in the listing only shows in the report.
func (s *Set) Observe(live *snapshot.ToolSnapshot) (*Candidate, error) {
	if live == nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: ErrInvalidSnapshot}
	}
	report, err := drift.Compare(s.recorded, live)
	if err != nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)}
	}
	c := &Candidate{Snapshot: live, Report: report}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tools {
		lt, ok := live.Lookup(t.RemoteName)
		if live.ProtocolVersion == s.recorded.ProtocolVersion && ok && lt.Digest == t.Digest {
			continue
		}
		c.Withdrawn = append(c.Withdrawn, t.Name)
		s.withdrawn[t.Name] = RefusalLiveDrift
	}
	return c, nil
}

// Withdrawn returns the local names of the admitted tools withdrawn during the run, sorted.
func (s *Set) Withdrawn() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.withdrawn))
	for n := range s.withdrawn {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Upstream is the session a Set calls through: *mcpclient.Session implements it.
type Upstream interface {
	// CallTool calls the remote tool name with args and returns the result object as received.
	CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

// Check returns the admitted tool named name (local name) and the arguments to send, or refuses:
// not_admitted, live_drift, invalid_arguments (wrapping an *argschema.Violation: a pointer and a
// keyword, never values).
func (s *Set) Check(name string, args json.RawMessage) (Tool, json.RawMessage, error) {
	t, ok := s.byName[name]
	if !ok {
		return Tool{}, nil, &Error{Name: RefusalNotAdmitted, Tool: name, Err: ErrNotAdmitted}
	}
	s.mu.Lock()
	_, gone := s.withdrawn[name]
	s.mu.Unlock()
	if gone {
		return Tool{}, nil, &Error{Name: RefusalLiveDrift, Tool: name, Err: ErrLiveDrift}
	}
	out, err := t.schema.Check(args)
	if err != nil {
		return Tool{}, nil, &Error{Name: RefusalInvalidArguments, Tool: name, Err: err}
	}
	return *t, out, nil
}

// Call checks the call (see Check) and calls the tool's remote name through up. The result is
// the upstream's result exactly as received; an upstream error is returned unchanged (for
// *mcpclient.Session, a *mcpclient.ToolError carries an isError result in full).
func (s *Set) Call(ctx context.Context, up Upstream, name string, args json.RawMessage) (json.RawMessage, error) {
	t, out, err := s.Check(name, args)
	if err != nil {
		return nil, err
	}
	return up.CallTool(ctx, t.RemoteName, out)
}
