package snapshot

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// plainDecodes are the encoding/json (and YAML) decodes allowed in the packages that read
// server, registry, signer and caller data, by file and enclosing function, each with the reason
// it needs no exact-case decoding. Every other decode there must go through Unmarshal (or
// k8sjson.UnmarshalCaseSensitivePreserveInts). The signed SLSA predicate and Docker configs were
// once decoded case-insensitively (ocipack's TestProvenancePredicateIsDecodedExactCase,
// TestDockerConfigIsDecodedExactCase).
var plainDecodes = map[string]string{
	"mcpclient/capture.go:deliverMembers": "an id into any: no struct field to case-fold onto",
	"mcpclient/capture.go:deliverRaw":     "a batch into []json.RawMessage: no struct field to case-fold onto",
	"mcpclient/capture.go:RoundTrip":      "the outgoing request the SDK wrote (not server data), and its id into any",
	"ociregistry/pack.go:checkJSON":       "a probe into map[string]json.RawMessage (no struct field to case-fold onto), then snapshot.Canonicalize refuses duplicates",
	"ocipack/profile.go:yamlToJSON":       "yaml.v3 nodes only, to count documents; the document is then converted with YAMLToJSONStrict and decoded with UnmarshalStrict",
	"ocipack/profile.go:canonicalToYAML":  "canonical JSON this package produced, into any (no struct field)",
}

// TestServerDataDecodesAreExactCase walks the consumer packages' sources (invocation, mcpclient,
// ocipack, internal/ociregistry, snapshot) and fails on any
// encoding/json decode (json.Unmarshal, Decoder.Decode) not allowed above, and on an allowance
// that no longer matches a decode.
func TestServerDataDecodesAreExactCase(t *testing.T) {
	fset := token.NewFileSet()
	used := map[string]bool{}
	for _, dir := range []string{"../internal/invocation", "../mcpclient", "../ocipack", "../internal/ociregistry", "."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			jsonName := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"encoding/json"` {
					jsonName = "json"
					if imp.Name != nil {
						jsonName = imp.Name.Name
					}
				}
			}
			rel := filepath.ToSlash(filepath.Join(filepath.Base(filepath.Clean(filepath.Join(dir))), filepath.Base(path)))
			if dir == "." {
				rel = "snapshot/" + filepath.Base(path)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					pkg, _ := sel.X.(*ast.Ident)
					plain := (jsonName != "" && pkg != nil && pkg.Name == jsonName && sel.Sel.Name == "Unmarshal") || sel.Sel.Name == "Decode"
					if !plain {
						return true
					}
					key := rel + ":" + fn.Name.Name
					used[key] = true
					if _, ok := plainDecodes[key]; !ok {
						t.Errorf("%s: %s decodes with encoding/json; use snapshot.Unmarshal (exact-case, duplicate keys refused) or allow it here with a reason",
							fset.Position(call.Pos()), key)
					}
					return true
				})
			}
		}
	}
	for key := range plainDecodes {
		if !used[key] {
			t.Errorf("allowance %s matches no decode: remove it", key)
		}
	}
}
