package review

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// Mark records why an operation of a repinned document needs a human decision.
type Mark struct {
	// Tool is the remote tool name.
	Tool string `json:"tool"`
	// OperationRef is the operation that maps the tool in the repinned document.
	OperationRef string `json:"operationRef"`
	// Kind is "changed" (effect reset to unreviewed, mapping kept) or "added" (placeholder).
	Kind string `json:"kind"`
	// PreviousEffect is the reviewed effect of a changed tool before it was reset.
	PreviousEffect apiv1.Effect `json:"previousEffect,omitempty"`
	// Classes are the classes of the tool's change.
	Classes []string `json:"classes"`
}

// Repinned is a profile document rebuilt against a candidate snapshot.
type Repinned struct {
	// Document is the new profile document. It records the candidate snapshot; every operation
	// listed in Marks carries the effect "unreviewed", which "mcpctl profile check", "pack push"
	// and admission refuse until a reviewer sets read, write or destructive.
	Document *apiv1.ProfileDocument `json:"document"`
	// Report is the drift report between the reviewed and the candidate snapshot.
	Report *Report `json:"report"`
	// Marks lists the operations awaiting review, in the document's operation order.
	Marks []Mark `json:"marks,omitempty"`
	// Dropped lists the operation references of removed tools, dropped from the document.
	Dropped []string `json:"dropped,omitempty"`
}

// SnapshotOfDocument returns the recorded snapshot of a profile document as a ToolSnapshot, after
// reconstructing its digests (ErrInvalidSnapshot when they do not reconstruct).
func SnapshotOfDocument(doc *apiv1.ProfileDocument) (*snapshot.ToolSnapshot, error) {
	if doc == nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: ErrInvalidSnapshot}
	}
	rs := doc.Snapshot
	s := &snapshot.ToolSnapshot{
		ProtocolVersion: rs.ProtocolVersion,
		ServerInfo:      snapshot.ServerInfo{Name: rs.ServerInfo.Name, Title: rs.ServerInfo.Title, Version: rs.ServerInfo.Version},
		Digest:          rs.Digest,
		Tools:           make([]snapshot.Tool, 0, len(rs.Tools)),
	}
	for _, t := range rs.Tools {
		s.Tools = append(s.Tools, snapshot.Tool{Name: t.Name, Digest: t.Digest, Descriptor: bytes.Clone(t.Descriptor.Raw)})
	}
	if err := s.Verify(); err != nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)}
	}
	return s, nil
}

// Repin rebuilds a reviewed profile document against a candidate snapshot: the document records
// the candidate snapshot; unchanged tools keep their mapping; changed tools keep operationRef,
// title and description but their effect becomes "unreviewed"; new tools get a placeholder
// mapping with effect "unreviewed" (operationRef derived from the tool name, title = the tool
// name: the server's own text is never copied); removed tools are dropped. Service and provider
// are kept. The result is a draft: it passes only draft validation until a reviewer clears every
// mark.
func Repin(reviewed *apiv1.ProfileDocument, candidate *snapshot.ToolSnapshot) (*Repinned, error) {
	old, err := SnapshotOfDocument(reviewed)
	if err != nil {
		return nil, err
	}
	rep, err := Compare(old, candidate)
	if err != nil {
		return nil, err
	}
	byTool := make(map[string]ToolDiff, len(rep.Tools))
	for _, td := range rep.Tools {
		byTool[td.Name] = td
	}
	mapping := make(map[string]apiv1.OperationMapping, len(reviewed.Operations))
	used := map[string]bool{}
	for _, o := range reviewed.Operations {
		mapping[o.RemoteName] = o
		used[o.OperationRef] = true
	}
	doc := reviewed.DeepCopy()
	doc.Snapshot = apiv1.RecordedSnapshot{
		ProtocolVersion: candidate.ProtocolVersion,
		ServerInfo:      apiv1.ServerInfo{Name: candidate.ServerInfo.Name, Title: candidate.ServerInfo.Title, Version: candidate.ServerInfo.Version},
		Digest:          candidate.Digest,
	}
	doc.Operations = nil
	out := &Repinned{Document: doc, Report: rep}
	for _, t := range candidate.Tools {
		doc.Snapshot.Tools = append(doc.Snapshot.Tools, apiv1.RecordedTool{
			Name: t.Name, Digest: t.Digest, Descriptor: runtime.RawExtension{Raw: bytes.Clone(t.Descriptor)},
		})
		td, drifted := byTool[t.Name]
		o, mapped := mapping[t.Name]
		switch {
		case mapped && !drifted:
			doc.Operations = append(doc.Operations, o)
		case mapped:
			out.Marks = append(out.Marks, Mark{Tool: t.Name, OperationRef: o.OperationRef, Kind: KindChanged, PreviousEffect: o.Effect, Classes: td.Classes})
			o.Effect = apiv1.EffectUnreviewed
			doc.Operations = append(doc.Operations, o)
		default:
			ref := uniqueRef(t.Name, used)
			classes := td.Classes
			if classes == nil {
				classes = []string{ClassNewTool}
			}
			out.Marks = append(out.Marks, Mark{Tool: t.Name, OperationRef: ref, Kind: KindAdded, Classes: classes})
			doc.Operations = append(doc.Operations, apiv1.OperationMapping{
				RemoteName: t.Name, OperationRef: ref, Title: truncate(t.Name, 256), Effect: apiv1.EffectUnreviewed,
			})
		}
	}
	seen := make(map[string]bool, len(candidate.Tools))
	for _, t := range candidate.Tools {
		seen[t.Name] = true
	}
	for _, o := range reviewed.Operations {
		if !seen[o.RemoteName] {
			out.Dropped = append(out.Dropped, o.OperationRef)
		}
	}
	return out, nil
}

// uniqueRef derives an operation reference from a tool name (as "profile init" does) that is not
// yet used, and records it.
func uniqueRef(name string, used map[string]bool) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		if b.Len() >= 120 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	ref := strings.Trim(b.String(), "._-")
	if ref == "" {
		ref = "op"
	}
	base := ref
	for n := 2; used[ref]; n++ {
		ref = fmt.Sprintf("%s-%d", base, n)
	}
	used[ref] = true
	return ref
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
