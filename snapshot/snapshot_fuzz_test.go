package snapshot

import (
	"bytes"
	"encoding/json"
	"sort"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"name":"echo","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
	`{"b":[1,2.5,-0,1e3,true,null],"a":{"z":"\u00e9","y":"\ud83d\ude00"}}`,
	`{"name":"t","annotations":{"readOnlyHint":false},"_meta":{"k":"v"}}`,
	`[1,"two",{"three":3}]`,
	`{"a":1,"a":2}`,
	"{\"a\":\"\xff\"}",
}

// FuzzCanonicalizeIdempotent: canonical output is itself canonical, valid JSON, and re-parsing
// the input through encoding/json (which reorders keys and drops whitespace) keeps the digest.
func FuzzCanonicalizeIdempotent(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Canonicalize(raw)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		c2, err := Canonicalize(c)
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent:\n%q\n%q", c, c2)
		}
		// Re-encode with a different key order and whitespace: same canonical form.
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("accepted input does not decode: %v", err)
		}
		re, err := json.MarshalIndent(v, " ", "\t") // encoding/json sorts keys (byte order)
		if err != nil {
			return
		}
		c3, err := Canonicalize(re)
		if err != nil {
			t.Fatalf("re-encoded input refused: %v", err)
		}
		if !bytes.Equal(c, c3) {
			t.Fatalf("key order/whitespace changed the canonical form:\n%q\n%q", c, c3)
		}
	})
}

// FuzzDigestMeaningChange: replacing a string value with a different string changes the digest;
// reordering keys does not.
func FuzzDigestMeaningChange(f *testing.F) {
	f.Add("echo", "Echo the input", "Echo the input!")
	f.Add("a", "", " ")
	f.Add("x", "\u200b", "")
	f.Fuzz(func(t *testing.T, name, desc, other string) {
		mk := func(d string, reversed bool) []byte {
			n, _ := json.Marshal(name)
			v, _ := json.Marshal(d)
			if reversed {
				return []byte(`{"description":` + string(v) + `,"name":` + string(n) + `}`)
			}
			return []byte(`{"name":` + string(n) + `, "description":` + string(v) + `}`)
		}
		d1, err := DescriptorDigest(mk(desc, false))
		if err != nil {
			return // e.g. invalid UTF-8 in the fuzzed strings is refused
		}
		d2, err := DescriptorDigest(mk(desc, true))
		if err != nil || d1 != d2 {
			t.Fatalf("key order changed the digest: %s %s %v", d1, d2, err)
		}
		d3, err := DescriptorDigest(mk(other, false))
		if err != nil {
			return
		}
		// json.Marshal maps invalid UTF-8 to U+FFFD, so compare what was actually encoded.
		var a, b struct{ Description string }
		_ = json.Unmarshal(mk(desc, false), &a)
		_ = json.Unmarshal(mk(other, false), &b)
		if (a.Description == b.Description) != (d1 == d3) {
			t.Fatalf("description %q -> %q: digests %s %s", a.Description, b.Description, d1, d3)
		}
	})
}

// digestByDefinition is the snapshot digest computed literally from its definition: sha256 over
// the RFC 8785 canonical form (via Canonicalize) of {"protocolVersion", "tools": [{"name",
// "digest"}]} sorted by name. Digest must agree with it.
func digestByDefinition(t *testing.T, protocol string, tools []Tool) string {
	type ref struct {
		Name   string `json:"name"`
		Digest string `json:"digest"`
	}
	refs := make([]ref, len(tools))
	for i, tl := range tools {
		refs[i] = ref{tl.Name, tl.Digest}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	doc, err := json.Marshal(struct {
		ProtocolVersion string `json:"protocolVersion"`
		Tools           []ref  `json:"tools"`
	}{protocol, refs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Digest(c)
}

// FuzzDigestMatchesDefinition: the directly written canonical form equals Canonicalize's.
func FuzzDigestMatchesDefinition(f *testing.F) {
	f.Add("2026-07-28", "echo", "read<&>\u2028\"\\\x01\t", "sha256:00")
	f.Add("", "", "é😀", "x")
	f.Fuzz(func(t *testing.T, protocol, a, b, digest string) {
		for _, s := range []string{protocol, a, b, digest} {
			if !utf8.ValidString(s) {
				if _, err := Digest(s, nil); err == nil && s == protocol {
					t.Fatal("invalid UTF-8 protocol version accepted")
				}
				return
			}
		}
		tools := []Tool{{Name: b, Digest: digest}, {Name: a, Digest: digest + "1"}}
		got, err := Digest(protocol, tools)
		if err != nil {
			t.Fatal(err)
		}
		if want := digestByDefinition(t, protocol, tools); got != want {
			t.Fatalf("Digest(%q, %q, %q) = %s, definition gives %s", protocol, a, b, got, want)
		}
	})
}

// FuzzScannerMatchesOracle: the single-pass scanner accepts exactly what the encoding/json based
// oracle accepts, finds the same descriptor name and the same Unicode warnings.
func FuzzScannerMatchesOracle(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"name":"x","d":"a\u200bb","k\u202e":[1,{"z":"\u0007"}],"n":-0.5e+3}`))
	f.Add([]byte(`[01]`))
	f.Add([]byte(`{"a":"\ud83d\ude00","b":"\ud800"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		type finding struct{ path, code string }
		var got, want []finding
		s, err := validateWalk(raw, scanWellFormed, func(p, c string) { got = append(got, finding{p, c}) })
		o, oerr := oracleValidateWalk(raw, func(p, c string) { want = append(want, finding{p, c}) })
		if (err == nil) != (oerr == nil) {
			t.Fatalf("scanner %v, oracle %v for %q", err, oerr, raw)
		}
		if err != nil {
			return
		}
		if s.hasName != o.hasName || s.name != o.name {
			t.Fatalf("name %q/%v, oracle %q/%v", s.name, s.hasName, o.name, o.hasName)
		}
		if len(got) != len(want) {
			t.Fatalf("findings %v, oracle %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("findings %v, oracle %v", got, want)
			}
		}
	})
}
