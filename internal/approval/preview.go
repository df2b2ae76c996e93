package approval

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// PreviewBounds bound the argument preview of a request.
type PreviewBounds struct {
	// MaxMembers is the number of top-level arguments shown (zero: DefaultPreviewMembers; at most
	// the CRD's 32).
	MaxMembers int
	// MaxValueBytes is the length of one shown value (zero: DefaultPreviewValueBytes; at most the
	// CRD's 1024).
	MaxValueBytes int
}

// Defaults of PreviewBounds.
const (
	DefaultPreviewMembers    = 32
	DefaultPreviewValueBytes = 256
)

// Preview returns the approver's view of args (one JSON object, already checked): each top-level
// member, sorted by name, with its value in RFC 8785 form cut at MaxValueBytes (Truncated) and
// its RFC 8785 digest; a member named in sensitive (the reviewed profile's sensitiveArguments)
// is shown by its digest only. At most MaxMembers are shown; truncated says there were more.
// Only the reviewed profile marks a value sensitive: the server's schema (writeOnly, formats)
// never hides anything from the approver, or a server could hide what it is asked to do.
func Preview(args json.RawMessage, sensitive []string, b PreviewBounds) (out []apiv1.ArgumentPreview, truncated bool) {
	maxMembers, maxValue := b.MaxMembers, b.MaxValueBytes
	if maxMembers <= 0 || maxMembers > 32 {
		maxMembers = DefaultPreviewMembers
	}
	if maxValue <= 0 || maxValue > 1024 {
		maxValue = DefaultPreviewValueBytes
	}
	ms, err := snapshot.Members(args)
	if err != nil {
		return nil, false
	}
	slices.SortFunc(ms, func(a, b snapshot.Member) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for _, m := range ms {
		if len(out) >= maxMembers {
			return out, true
		}
		name := m.Name
		if len(name) > 256 || !utf8.ValidString(name) {
			// A name beyond the CRD bound is shown by its digest.
			name, _ = snapshot.DescriptorDigest(mustJSON(m.Name))
		}
		p := apiv1.ArgumentPreview{Name: name}
		if d, err := snapshot.DescriptorDigest(m.Value); err == nil {
			p.Digest = d
		}
		if slices.Contains(sensitive, m.Name) {
			p.Sensitive = true
		} else {
			v, err := snapshot.Canonicalize(m.Value)
			if err != nil {
				v = m.Value
			}
			p.Value, p.Truncated = cut(string(v), maxValue)
		}
		out = append(out, p)
	}
	return out, false
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// cut returns s cut at n bytes on a rune boundary, and whether it was cut.
func cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}
