// Package drift explains a snapshot drift to a human reviewer: a field-level diff of every
// changed tool (JSON Pointer paths with old and new values), a class per change (text_only,
// schema_widened, schema_narrowed, annotation_changed, new_tool, removed_tool, protocol_change,
// other_field) and the warnings a reviewer must not miss (invisible or bidi Unicode, URLs added).
//
// Classes only inform review. Any drift refuses activation, whatever its class: nothing here
// decides anything. The package is pure (no I/O, no Kubernetes): the operator's review loop and
// a local consumer (package admission, mcpctl serve) build the same classified diff with it.
package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// ErrInvalidSnapshot is the reason Compare refuses a snapshot whose descriptors do not decode as
// JSON objects or whose digests do not reconstruct (refusal "invalid_snapshot").
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// RefusalInvalidSnapshot is the stable refusal name of ErrInvalidSnapshot.
const RefusalInvalidSnapshot = "invalid_snapshot"

// Error is a named refusal of this package. It never carries descriptor text.
type Error struct {
	// Name is the stable refusal name, e.g. "invalid_snapshot".
	Name string
	// Tool names the tool concerned, when known.
	Tool string
	// Err is the reason; errors.Is matches the package sentinels through it.
	Err error
}

func (e *Error) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("%s: tool %q: %v", e.Name, e.Tool, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Name, e.Err)
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// Refusal returns the stable refusal name.
func (e *Error) Refusal() string { return e.Name }

// Tool change kinds.
const (
	// KindAdded is a tool only the candidate lists.
	KindAdded = "added"
	// KindRemoved is a tool only the reviewed snapshot lists.
	KindRemoved = "removed"
	// KindChanged is a tool whose descriptor digest changed.
	KindChanged = "changed"
)

// Change is one field-level difference inside a tool descriptor.
type Change struct {
	// Path is the RFC 6901 JSON Pointer of the member inside the descriptor, e.g.
	// "/inputSchema/properties/path/maxLength".
	Path string `json:"path"`
	// Old is the reviewed value; absent when the member was added.
	Old json.RawMessage `json:"old,omitempty"`
	// New is the candidate value; absent when the member was removed.
	New json.RawMessage `json:"new,omitempty"`
	// Classes are the classes of this change, never empty.
	Classes []string `json:"classes"`
}

// ToolDiff is the difference of one tool between the reviewed and the candidate snapshot.
type ToolDiff struct {
	// Name is the remote tool name.
	Name string `json:"name"`
	// Kind is "added", "removed" or "changed".
	Kind string `json:"kind"`
	// From is the reviewed descriptor digest (empty for an added tool).
	From string `json:"from,omitempty"`
	// To is the candidate descriptor digest (empty for a removed tool).
	To string `json:"to,omitempty"`
	// Classes is the union of the classes of the changes, never empty.
	Classes []string `json:"classes"`
	// Changes are the field-level changes of a changed tool, sorted by path.
	Changes []Change `json:"changes,omitempty"`
	// Warnings are the snapshot warnings (invisible_unicode, bidi_control, control_character) of
	// the candidate descriptor of an added or changed tool.
	Warnings []snapshot.Warning `json:"warnings,omitempty"`
	// Flags are further evidence: "url_added" when the candidate descriptor holds a URL the
	// reviewed one did not.
	Flags []string `json:"flags,omitempty"`
}

// Report is the reviewer's view of a drift.
type Report struct {
	// ProtocolFrom is the reviewed protocol revision.
	ProtocolFrom string `json:"protocolFrom"`
	// ProtocolTo is the candidate protocol revision.
	ProtocolTo string `json:"protocolTo"`
	// Recorded is the reviewed snapshot digest.
	Recorded string `json:"recorded"`
	// Candidate is the candidate snapshot digest.
	Candidate string `json:"candidate"`
	// Tools lists every added, removed and changed tool, sorted by name.
	Tools []ToolDiff `json:"tools,omitempty"`
	// Counts is the number of tools per class (protocol_change counts 1), only non-zero entries.
	Counts map[string]int `json:"counts,omitempty"`
}

// Empty reports whether the two snapshots were equal.
func (r *Report) Empty() bool { return r.ProtocolFrom == r.ProtocolTo && len(r.Tools) == 0 }

// Compare returns the field-level report of the difference between the reviewed snapshot and a
// candidate. Both snapshots' digests are reconstructed first; a descriptor that is not a JSON
// object is refused with ErrInvalidSnapshot.
func Compare(reviewed, candidate *snapshot.ToolSnapshot) (*Report, error) {
	for _, s := range []*snapshot.ToolSnapshot{reviewed, candidate} {
		if s == nil {
			return nil, &Error{Name: RefusalInvalidSnapshot, Err: ErrInvalidSnapshot}
		}
		if err := s.Verify(); err != nil {
			return nil, &Error{Name: RefusalInvalidSnapshot, Err: fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)}
		}
	}
	rep := &Report{ProtocolFrom: reviewed.ProtocolVersion, ProtocolTo: candidate.ProtocolVersion,
		Recorded: reviewed.Digest, Candidate: candidate.Digest, Counts: map[string]int{}}
	if rep.ProtocolFrom != rep.ProtocolTo {
		rep.Counts[ClassProtocolChange] = 1
	}
	old := make(map[string]snapshot.Tool, len(reviewed.Tools))
	for _, t := range reviewed.Tools {
		old[t.Name] = t
	}
	seen := make(map[string]bool, len(candidate.Tools))
	for _, t := range candidate.Tools {
		seen[t.Name] = true
		o, ok := old[t.Name]
		if ok && o.Digest == t.Digest {
			continue
		}
		td := ToolDiff{Name: t.Name, To: t.Digest}
		nv, err := decode(t)
		if err != nil {
			return nil, err
		}
		oldURLs := map[string]bool{}
		if !ok {
			td.Kind, td.Classes = KindAdded, []string{ClassNewTool}
		} else {
			ov, err := decode(o)
			if err != nil {
				return nil, err
			}
			urlsIn(ov, oldURLs)
			td.Kind, td.From = KindChanged, o.Digest
			diffValues(nil, ov, nv, &td.Changes)
			if len(td.Changes) == 0 {
				// Digests differ but the decoded values compare equal: never hide it.
				td.Changes = []Change{{Path: "", Old: o.Descriptor, New: t.Descriptor}}
			}
			var cls []string
			for i := range td.Changes {
				c := &td.Changes[i]
				c.Classes = classifyPath(splitPointer(c.Path), rawValue(c.Old), rawValue(c.New))
				cls = append(cls, c.Classes...)
			}
			td.Classes = sortClasses(cls)
		}
		newURLs := map[string]bool{}
		urlsIn(nv, newURLs)
		for u := range newURLs {
			if !oldURLs[u] {
				td.Flags = []string{FlagURLAdded}
				break
			}
		}
		if fresh, err := snapshot.New(candidate.ProtocolVersion, candidate.ServerInfo, []json.RawMessage{t.Descriptor}); err == nil {
			td.Warnings = fresh.Warnings
		}
		rep.Tools = append(rep.Tools, td)
	}
	for _, t := range reviewed.Tools {
		if !seen[t.Name] {
			rep.Tools = append(rep.Tools, ToolDiff{Name: t.Name, Kind: KindRemoved, From: t.Digest, Classes: []string{ClassRemovedTool}})
		}
	}
	sort.Slice(rep.Tools, func(i, j int) bool { return rep.Tools[i].Name < rep.Tools[j].Name })
	for _, td := range rep.Tools {
		for _, c := range td.Classes {
			rep.Counts[c]++
		}
	}
	if len(rep.Counts) == 0 {
		rep.Counts = nil
	}
	return rep, nil
}

// decode decodes a descriptor with numbers kept as json.Number.
func decode(t snapshot.Tool) (any, error) {
	d := json.NewDecoder(bytes.NewReader(t.Descriptor))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Tool: t.Name, Err: fmt.Errorf("%w: descriptor does not decode", ErrInvalidSnapshot)}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &Error{Name: RefusalInvalidSnapshot, Tool: t.Name, Err: fmt.Errorf("%w: descriptor is not an object", ErrInvalidSnapshot)}
	}
	return v, nil
}

// diffValues appends the leaf differences of a and b below path. Objects are compared member by
// member; arrays and scalars are compared whole by their RFC 8785 canonical form.
func diffValues(path []string, a, b any, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := make([]string, 0, len(am)+len(bm))
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, dup := am[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			av, ain := am[k]
			bv, bin := bm[k]
			p := append(path[:len(path):len(path)], k)
			switch {
			case !ain:
				*out = append(*out, Change{Path: pointer(p), New: mustRaw(bv)})
			case !bin:
				*out = append(*out, Change{Path: pointer(p), Old: mustRaw(av)})
			default:
				diffValues(p, av, bv, out)
			}
		}
		return
	}
	ac, err1 := canonical(a)
	bc, err2 := canonical(b)
	if err1 == nil && err2 == nil && bytes.Equal(ac, bc) {
		return
	}
	*out = append(*out, Change{Path: pointer(path), Old: mustRaw(a), New: mustRaw(b)})
}

// canonical returns the RFC 8785 form of a decoded value.
func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return snapshot.Canonicalize(b)
}

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// rawValue decodes a change value back for classification; nil stands for absent.
func rawValue(r json.RawMessage) any {
	if r == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(r))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	if v == nil {
		// JSON null is present: keep it distinct from absence.
		return jsonNull{}
	}
	return v
}

// jsonNull is a present JSON null.
type jsonNull struct{}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func pointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(t))
	}
	return b.String()
}

var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = pointerUnescaper.Replace(s)
	}
	return parts
}

// urlPattern matches a URL with a scheme, or a bare "www." host.
var urlPattern = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]{1,31}://[^\s"'<>]+|\bwww\.[^\s"'<>]+|\b(?:javascript|data|mailto):[^\s"'<>]+`)

// Error has the shared refusal shape.
var _ refusal.Named = (*Error)(nil)
