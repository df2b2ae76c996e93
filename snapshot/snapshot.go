// Package snapshot defines the ToolSnapshot: the frozen, reviewable description of an MCP server's
// tool surface, with RFC 8785 (JSON Canonicalization Scheme) digests and comparison.
//
// A snapshot keeps every tool descriptor exactly as received (the whole tool object, unknown fields
// included) and its digest "sha256:<hex>" over the descriptor's canonical form. The snapshot digest
// is sha256 over the canonical form of
//
//	{"protocolVersion": ..., "tools": [{"name": ..., "digest": ...}, ...]}
//
// with tools sorted by name, so the same server with the same tools yields the same digest whatever
// the key order or whitespace on the wire. Input that canonical JSON cannot represent faithfully
// (duplicate keys, invalid UTF-8, trailing data, numbers that RFC 8785 would merge with another
// number: see Canonicalize) and duplicate tool names are refused with a
// *RefusalError naming the refusal. Invisible or bidirectional Unicode is recorded as a Warning,
// never silently accepted.
//
// Unmarshal is the one decoder for untrusted JSON (server, registry and caller documents) in this
// module's MCP path: it refuses what Validate refuses and matches member names exactly, so a case
// variant ("InputSchema" next to "inputSchema") is never read as the member.
//
// The package is pure: it does no I/O and does not depend on an MCP implementation.
package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// ServerInfo is the server identity reported during negotiation. It is evidence, not authority,
// and is not part of the snapshot digest.
type ServerInfo struct {
	// Name is the server's implementation name.
	Name string `json:"name"`
	// Title is the server's optional display title.
	Title string `json:"title,omitempty"`
	// Version is the server's implementation version.
	Version string `json:"version,omitempty"`
}

// Tool is one frozen tool descriptor.
type Tool struct {
	// Name is the descriptor's "name" member.
	Name string `json:"name"`
	// Digest is "sha256:<hex>" over the RFC 8785 canonical form of Descriptor.
	Digest string `json:"digest"`
	// Descriptor is the whole tool object exactly as received.
	Descriptor json.RawMessage `json:"descriptor"`
}

// Warning is a finding for reviewers in one descriptor.
type Warning struct {
	// Tool is the name of the tool whose descriptor holds the finding.
	Tool string `json:"tool"`
	// Path is the RFC 6901 JSON Pointer of the member whose name or string value holds it.
	Path string `json:"path"`
	// Code is one of WarnInvisibleUnicode, WarnBidiControl, WarnControlCharacter.
	Code string `json:"code"`
}

// ToolSnapshot is the immutable result of discovery. Treat a snapshot as read-only once built: a
// new listing makes a new snapshot.
type ToolSnapshot struct {
	// ProtocolVersion is the negotiated MCP protocol revision, e.g. "2026-07-28".
	ProtocolVersion string `json:"protocolVersion"`
	// ServerInfo is the server identity (evidence only).
	ServerInfo ServerInfo `json:"serverInfo"`
	// Digest is the snapshot digest (see the package documentation).
	Digest string `json:"digest"`
	// Tools are the frozen descriptors, sorted by name.
	Tools []Tool `json:"tools"`
	// Warnings are reviewer findings, sorted by tool, path and code.
	Warnings []Warning `json:"warnings,omitempty"`
}

// SortWarnings sorts warnings by tool, path and code, the order of ToolSnapshot.Warnings (for
// callers that add findings of their own to a new snapshot).
func SortWarnings(ws []Warning) {
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Code < b.Code
	})
}

// Digest returns the snapshot digest for protocolVersion and tools: sha256 over the canonical form
// of {"protocolVersion", "tools": [{"name", "digest"}]} with tools sorted by name. Only names and
// digests are used; descriptors are not read.
func Digest(protocolVersion string, tools []Tool) (string, error) {
	sorted := true
	for i := 1; i < len(tools); i++ {
		if tools[i-1].Name > tools[i].Name {
			sorted = false
			break
		}
	}
	var refs []*Tool // only when tools are not in name order
	if !sorted {
		refs = make([]*Tool, len(tools))
		for i := range tools {
			refs[i] = &tools[i]
		}
		sort.SliceStable(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	}
	if !utf8.ValidString(protocolVersion) {
		return "", &RefusalError{Name: RefusalInvalidUTF8, Err: ErrInvalidUTF8}
	}
	// The document's canonical form is written directly: members in RFC 8785 order ("digest" <
	// "name", "protocolVersion" < "tools"), strings in RFC 8785 form; it is hashed in chunks, never
	// held whole.
	h := sha256.New()
	b := make([]byte, 0, 8192)
	b = append(b, `{"protocolVersion":`...)
	b = appendCanonicalString(b, protocolVersion)
	b = append(b, `,"tools":[`...)
	for i := range tools {
		t := &tools[i]
		if refs != nil {
			t = refs[i]
		}
		if !utf8.ValidString(t.Name) || !utf8.ValidString(t.Digest) {
			return "", &RefusalError{Name: RefusalInvalidUTF8, Tool: t.Name, Err: ErrInvalidUTF8}
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"digest":`...)
		b = appendCanonicalString(b, t.Digest)
		b = append(b, `,"name":`...)
		b = appendCanonicalString(b, t.Name)
		b = append(b, '}')
		if len(b) >= 4096 {
			h.Write(b)
			b = b[:0]
		}
	}
	b = append(b, "]}"...)
	h.Write(b)
	return digestString(h.Sum(b[:0])), nil
}

// New builds a snapshot from raw tool descriptors as received. Each descriptor must be a JSON object
// with a non-empty string "name"; names must be unique. The raw bytes are copied, so the caller may
// reuse its buffers. Tools are sorted by name and warnings computed.
func New(protocolVersion string, server ServerInfo, descriptors []json.RawMessage) (*ToolSnapshot, error) {
	s := &ToolSnapshot{ProtocolVersion: protocolVersion, ServerInfo: server, Tools: make([]Tool, 0, len(descriptors))}
	seen := make(map[string]struct{}, len(descriptors))
	// One copy of every descriptor, in one allocation; one canonical-form buffer, reused.
	total := 0
	for _, raw := range descriptors {
		total += len(raw)
	}
	arena := make([]byte, 0, total)
	var w scanner
	for _, raw := range descriptors {
		t, warns, err := freeze(&w, raw)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[t.Name]; dup {
			return nil, &RefusalError{Name: RefusalDuplicateToolName, Tool: t.Name, Err: ErrDuplicateToolName}
		}
		seen[t.Name] = struct{}{}
		at := len(arena)
		arena = append(arena, raw...)
		t.Descriptor = arena[at:len(arena):len(arena)]
		s.Tools = append(s.Tools, t)
		s.Warnings = append(s.Warnings, warns...)
	}
	if !slices.IsSortedFunc(s.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) }) {
		sort.Slice(s.Tools, func(i, j int) bool { return s.Tools[i].Name < s.Tools[j].Name })
	}
	SortWarnings(s.Warnings)
	d, err := Digest(protocolVersion, s.Tools)
	if err != nil {
		return nil, err
	}
	s.Digest = d
	return s, nil
}

// freeze validates and canonicalizes one descriptor in a single pass with w (reused across
// descriptors, with its canonical-form buffer) and returns its Tool (without Descriptor: the
// caller stores its own copy of raw) and warnings. The warnings are w's scratch space, valid until
// w scans again: the caller copies them.
func freeze(w *scanner, raw json.RawMessage) (Tool, []Warning, error) {
	w.collect = true
	err := w.canonical(raw, w.out[:0], nil)
	findings := w.found
	if err != nil {
		var r *RefusalError
		if errors.As(err, &r) && w.hasName {
			r.Tool = w.name
		}
		return Tool{}, nil, err
	}
	name, err := descriptorName(raw, w)
	if err != nil {
		return Tool{}, nil, err
	}
	for i := range findings {
		findings[i].Tool = name
	}
	return Tool{Name: name, Digest: sha256Digest(w.out)}, findings, nil
}

// descriptorName returns the exact top-level "name" member of a descriptor validated by w.
func descriptorName(raw []byte, w *scanner) (string, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || !w.hasName || w.name == "" {
		return "", &RefusalError{Name: RefusalInvalidDescriptor, Err: ErrInvalidDescriptor}
	}
	return w.name, nil
}

// Verify reconstructs every descriptor digest and the snapshot digest from the recorded
// descriptors. It fails with a *MismatchError naming the tool whose digest differs (or with an
// empty Tool for the snapshot digest), or with a *RefusalError when a recorded descriptor is
// itself refused, names a different tool than recorded, or two tools share a name.
func (s *ToolSnapshot) Verify() error {
	seen := make(map[string]struct{}, len(s.Tools))
	w := &scanner{}
	for _, t := range s.Tools {
		err := w.canonical(t.Descriptor, w.out[:0], nil)
		if err != nil {
			var r *RefusalError
			if errors.As(err, &r) {
				r.Tool = t.Name
			}
			return err
		}
		name, err := descriptorName(t.Descriptor, w)
		if err != nil || name != t.Name {
			return &RefusalError{Name: RefusalInvalidDescriptor, Tool: t.Name, Err: ErrInvalidDescriptor}
		}
		if _, dup := seen[name]; dup {
			return &RefusalError{Name: RefusalDuplicateToolName, Tool: name, Err: ErrDuplicateToolName}
		}
		seen[name] = struct{}{}
		if d := sha256Digest(w.out); d != t.Digest {
			return &MismatchError{Tool: t.Name, Recorded: t.Digest, Computed: d}
		}
	}
	d, err := Digest(s.ProtocolVersion, s.Tools)
	if err != nil {
		return err
	}
	if d != s.Digest {
		return &MismatchError{Recorded: s.Digest, Computed: d}
	}
	return nil
}

// Lookup returns the tool named name, if present.
func (s *ToolSnapshot) Lookup(name string) (Tool, bool) {
	i := sort.Search(len(s.Tools), func(i int) bool { return s.Tools[i].Name >= name })
	if i < len(s.Tools) && s.Tools[i].Name == name {
		return s.Tools[i], true
	}
	for _, t := range s.Tools { // tolerate snapshots not sorted by New
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// ToolRef names one tool and its descriptor digest in a Diff.
type ToolRef struct {
	// Name is the tool name.
	Name string `json:"name"`
	// Digest is the descriptor digest.
	Digest string `json:"digest"`
}

// ChangedTool is a tool present on both sides with different descriptor digests.
type ChangedTool struct {
	// Name is the tool name.
	Name string `json:"name"`
	// From is the recorded descriptor digest.
	From string `json:"from"`
	// To is the live descriptor digest.
	To string `json:"to"`
}

// Diff is the difference between a recorded and a live snapshot, by names and digests only (no
// descriptor text), suitable for status and CLI output.
type Diff struct {
	// ProtocolFrom is the recorded protocol version.
	ProtocolFrom string `json:"protocolFrom"`
	// ProtocolTo is the live protocol version.
	ProtocolTo string `json:"protocolTo"`
	// Added are tools present live but not recorded.
	Added []ToolRef `json:"added,omitempty"`
	// Removed are tools recorded but no longer present live.
	Removed []ToolRef `json:"removed,omitempty"`
	// Changed are tools whose descriptor digest differs.
	Changed []ChangedTool `json:"changed,omitempty"`
}

// Compare returns the difference from recorded to live. Lists are sorted by name. A nil snapshot is
// treated as empty.
func Compare(recorded, live *ToolSnapshot) Diff {
	if recorded == nil {
		recorded = &ToolSnapshot{}
	}
	if live == nil {
		live = &ToolSnapshot{}
	}
	d := Diff{ProtocolFrom: recorded.ProtocolVersion, ProtocolTo: live.ProtocolVersion}
	rec := make(map[string]string, len(recorded.Tools))
	for _, t := range recorded.Tools {
		rec[t.Name] = t.Digest
	}
	liv := make(map[string]string, len(live.Tools))
	for _, t := range live.Tools {
		liv[t.Name] = t.Digest
		from, ok := rec[t.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, ToolRef{Name: t.Name, Digest: t.Digest})
		case from != t.Digest:
			d.Changed = append(d.Changed, ChangedTool{Name: t.Name, From: from, To: t.Digest})
		}
	}
	for _, t := range recorded.Tools {
		if _, ok := liv[t.Name]; !ok {
			d.Removed = append(d.Removed, ToolRef{Name: t.Name, Digest: t.Digest})
		}
	}
	sort.Slice(d.Added, func(i, j int) bool { return d.Added[i].Name < d.Added[j].Name })
	sort.Slice(d.Removed, func(i, j int) bool { return d.Removed[i].Name < d.Removed[j].Name })
	sort.Slice(d.Changed, func(i, j int) bool { return d.Changed[i].Name < d.Changed[j].Name })
	return d
}

// Empty reports whether the diff records no change at all: same protocol version and the same
// tool names with the same descriptor digests.
func (d Diff) Empty() bool {
	return d.ProtocolFrom == d.ProtocolTo && len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0
}
