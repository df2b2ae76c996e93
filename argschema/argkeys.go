package argschema

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// KeywordAmbiguousKeys is the InvalidArgumentsError.Keyword of arguments holding an object with
// two member names that are equal under Unicode simple case folding ("amount" and "Amount",
// "k" and "\u212a" KELVIN SIGN): an upstream that decodes case-insensitively, as Go's
// encoding/json does, could read the member the schema did not validate. Pointer locates the
// object. The arguments are refused (a *Violation); nothing is sent.
const KeywordAmbiguousKeys = "ambiguousKeys"

// ambiguousKeys returns the JSON Pointer of the first object in v (a decoded JSON value: maps,
// slices, scalars) that holds two member names equal under simple case folding, or ok false
// when there is none. Objects are visited depth first, members in sorted order, so the answer
// does not depend on map order. The walk is iterative: nesting depth costs no stack.
func ambiguousKeys(v any) (pointer string, ok bool) {
	type item struct {
		v   any
		ptr string
	}
	stack := []item{{v, ""}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := it.v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			seen := make(map[string]struct{}, len(x))
			for k := range x {
				f := foldKey(k)
				if _, dup := seen[f]; dup {
					return it.ptr, true
				}
				seen[f] = struct{}{}
				keys = append(keys, k)
			}
			// Pushed in reverse sorted order: popped (visited) in sorted order.
			slices.Sort(keys)
			for _, k := range slices.Backward(keys) {
				switch c := x[k]; c.(type) {
				case map[string]any, []any:
					stack = append(stack, item{c, it.ptr + "/" + escapePointer(k)})
				}
			}
		case []any:
			for i, c := range slices.Backward(x) {
				switch c.(type) {
				case map[string]any, []any:
					stack = append(stack, item{c, it.ptr + "/" + strconv.Itoa(i)})
				}
			}
		}
	}
	return "", false
}

// foldKey maps s to a canonical form such that foldKey(a) == foldKey(b) exactly when
// strings.EqualFold(a, b) (which is what bytes.EqualFold, and so encoding/json's case-insensitive
// member matching, decide): each rune becomes the smallest rune of its simple folding orbit.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// escapePointer escapes one JSON Pointer reference token (RFC 6901).
func escapePointer(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}
