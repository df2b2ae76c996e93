package snapshot

import (
	"slices"
	"testing"
	"unicode/utf16"

	"github.com/b10x/connector-mcp/refusal"
)

// TestLessUTF16MatchesCodeUnits checks the member-name order (with its ASCII fast path) against
// a direct comparison of UTF-16 code units, over names mixing ASCII, BMP characters below and
// above U+E000, and supplementary characters, at the first and at later positions.
func TestLessUTF16MatchesCodeUnits(t *testing.T) {
	names := []string{"", "a", "b", "ab", "aé", "a\u00e9b", "\u00e9", "\ue000", "\uffff", "a\ue000",
		"\U0001f600", "a\U0001f600", "\U00010000", "\U0010ffff", "Z", "\x7f", "\u0080", "a\x7f", "aa"}
	for _, a := range names {
		for _, b := range names {
			want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))) < 0
			if got := lessUTF16([]byte(a), []byte(b)); got != want {
				t.Errorf("lessUTF16(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// TestCanonicalOrdersEscapedNames: member names written with escapes are ordered by their decoded
// value, among names without escapes, in small and in large objects; a repeated name is refused
// whichever way each occurrence is written.
func TestCanonicalOrdersEscapedNames(t *testing.T) {
	got, err := Canonicalize([]byte(`{"\u0063":1,"b":2,"\u00e9":3,"\ud83d\ude00":4,"\uE000":5,"a":{"\u007a":0,"y":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"a\":{\"y\":1,\"z\":0},\"b\":2,\"c\":1,\"\u00e9\":3,\"\U0001f600\":4,\"\ue000\":5}"; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	large := []byte(`{"q":0,"p":0,"o":0,"n":0,"m":0,"l":0,"k":0,"j":0,"i":0,"h":0,"g":0,"f":0,"e":0,"d":0,"c":0,"b":0,"\u0061":0}`)
	if got, err = Canonicalize(large); err != nil || string(got) != `{"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":0,"h":0,"i":0,"j":0,"k":0,"l":0,"m":0,"n":0,"o":0,"p":0,"q":0}` {
		t.Fatalf("large object: %s, %v", got, err)
	}
	for _, doc := range []string{`{"\u0061":1,"a":2}`, `{"x":{"\u00e9":1,"é":2}}`, `{"q":0,"p":0,"o":0,"n":0,"m":0,"l":0,"k":0,"j":0,"i":0,"h":0,"g":0,"f":0,"e":0,"d":0,"c":0,"b":0,"a":0,"\u0062":1}`} {
		_, err := Canonicalize([]byte(doc))
		if refusal.Name(err) != RefusalDuplicateKey {
			t.Errorf("%s: got %v, want %s", doc, err, RefusalDuplicateKey)
		}
	}
}
