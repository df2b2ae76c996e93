package argschema

import (
	"strings"
	"testing"
)

// foldKey(a) == foldKey(b) exactly when strings.EqualFold(a, b), which is the rule of
// bytes.EqualFold and of encoding/json's case-insensitive member matching.
func FuzzFoldKeyIsEqualFold(f *testing.F) {
	for _, p := range [][2]string{
		{"amount", "Amount"}, {"k", "\u212a"}, {"K", "\u212a"}, {"s", "\u017f"}, {"S", "\u017f"},
		{"\u00b5", "\u03bc"}, {"\u00c5", "\u212b"}, {"\u03a3", "\u03c2"}, {"\u1e9e", "\u00df"},
		{"amount", "amounts"}, {"", ""}, {"a", ""}, {"\u0130", "i"}, {"\u0131", "I"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
			t.Fatalf("foldKey(%q)==foldKey(%q) is %v, EqualFold %v", a, b, got, want)
		}
	})
}
