package controllers

import (
	"fmt"
	"strings"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// matchDecision is the outcome of comparing a live snapshot against the reviewed one.
type matchDecision struct {
	// Matched is true when the live snapshot equals the reviewed one: same protocol revision,
	// same tool names, same descriptor digests and the same snapshot digest.
	Matched bool
	// Diff is the difference by names and digests (empty when Matched).
	Diff snapshot.Diff
}

// decideMatch compares the live snapshot against the reviewed one. Equality is typed: protocol
// revision, every descriptor digest (RFC 8785, so byte-for-byte on the canonical form) and the
// snapshot digest must all agree.
func decideMatch(recorded, live *snapshot.ToolSnapshot) matchDecision {
	d := snapshot.Compare(recorded, live)
	ok := d.Empty() && recorded != nil && live != nil && recorded.Digest == live.Digest && len(recorded.Tools) == len(live.Tools)
	return matchDecision{Matched: ok, Diff: d}
}

// driftStatus renders a diff for status: names and digests only, protocol only when it changed,
// each list bounded to the API's maximum.
func driftStatus(d snapshot.Diff) *v1.SnapshotDrift {
	const maxItems = 512
	out := &v1.SnapshotDrift{}
	if d.ProtocolFrom != d.ProtocolTo {
		out.ProtocolFrom, out.ProtocolTo = clipN(d.ProtocolFrom, 10), clipN(d.ProtocolTo, 10)
	}
	for i, t := range d.Added {
		if i == maxItems {
			break
		}
		out.Added = append(out.Added, v1.ToolRef{Name: clipN(t.Name, 128), Digest: t.Digest})
	}
	for i, t := range d.Removed {
		if i == maxItems {
			break
		}
		out.Removed = append(out.Removed, v1.ToolRef{Name: clipN(t.Name, 128), Digest: t.Digest})
	}
	for i, t := range d.Changed {
		if i == maxItems {
			break
		}
		out.Changed = append(out.Changed, v1.ChangedTool{Name: clipN(t.Name, 128), From: t.From, To: t.To})
	}
	return out
}

// driftSummary is a one-line, prose-free summary of a diff for a condition message.
func driftSummary(d snapshot.Diff) string {
	var parts []string
	if d.ProtocolFrom != d.ProtocolTo {
		parts = append(parts, fmt.Sprintf("protocol %s -> %s", clipN(d.ProtocolFrom, 10), clipN(d.ProtocolTo, 10)))
	}
	names := func(kind string, n int, name func(int) string) {
		if n == 0 {
			return
		}
		var ns []string
		for i := 0; i < n && i < 5; i++ {
			ns = append(ns, fmt.Sprintf("%q", clip(name(i))))
		}
		if n > 5 {
			ns = append(ns, fmt.Sprintf("and %d more", n-5))
		}
		parts = append(parts, kind+" "+strings.Join(ns, ", "))
	}
	names("added", len(d.Added), func(i int) string { return d.Added[i].Name })
	names("removed", len(d.Removed), func(i int) string { return d.Removed[i].Name })
	names("changed", len(d.Changed), func(i int) string { return d.Changed[i].Name })
	if len(parts) == 0 {
		parts = append(parts, "snapshot digest differs")
	}
	return "the live tool list differs from the reviewed snapshot: " + strings.Join(parts, "; ")
}
