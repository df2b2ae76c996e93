package importrules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/refusal"
)

// refusalDirs are the packages whose refusal names are all exported constants: no refusal name is
// spelt as a literal where a refusal is built (issue 11: "Every library exports its refusal names
// as constants; no literals in callers").
var refusalDirs = []string{"refusal", "snapshot", "mcpclient", "ocipack", "egress", "admission", "argschema", "internal/review", "mcpclient/oauth", "internal/k8sbinding", "internal/invocation", "cmd/mcpctl"}

// literalRefusals reports, for the non-test Go files of dir, every place a refusal is built from a
// string literal: refuse("name", ...), a composite literal with Name: or Feature: "name", a
// Refusal method returning "name", and a reason table entry reason{N, "name", ...}.
func literalRefusals(t *testing.T, fset *token.FileSet, dir string) []string {
	t.Helper()
	entries, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, file := range entries {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, literalRefusalsIn(fset, f)...)
	}
	return out
}

func literalRefusalsIn(fset *token.FileSet, f *ast.File) []string {
	var out []string
	report := func(n ast.Node, lit *ast.BasicLit, how string) {
		p := fset.Position(n.Pos())
		out = append(out, fmt.Sprintf("%s:%d: %s %s", filepath.ToSlash(p.Filename), p.Line, how, lit.Value))
	}
	str := func(e ast.Expr) (*ast.BasicLit, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil, false
		}
		s, err := strconv.Unquote(lit.Value)
		return lit, err == nil && refusal.Valid(s)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			name := ""
			switch fn := n.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if strings.HasPrefix(strings.ToLower(name), "refuse") && len(n.Args) > 0 {
				if lit, ok := str(n.Args[0]); ok {
					report(n, lit, "refuse(...) with literal")
				}
			}
		case *ast.CompositeLit:
			for i, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "Name" || k.Name == "Feature") {
						if lit, ok := str(kv.Value); ok && isRefusalType(n.Type) {
							report(kv, lit, k.Name+": literal")
						}
					}
					continue
				}
				// reason{rank, "name", sentinel}: a positional refusal table entry.
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "reason" && i == 1 {
					if lit, ok := str(e); ok {
						report(e, lit, "reason table literal")
					}
				}
			}
		case *ast.FuncDecl:
			if n.Recv != nil && n.Name.Name == "Refusal" && n.Body != nil {
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if r, ok := m.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
						if lit, ok := str(r.Results[0]); ok {
							report(r, lit, "Refusal() returns literal")
						}
					}
					return true
				})
			}
		}
		return true
	})
	return out
}

// isRefusalType reports whether a composite literal's type names an error type (…Error or
// …Refusal), where a Name or Feature field is a refusal name.
func isRefusalType(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.Ident:
		return strings.HasSuffix(t.Name, "Error") || strings.HasSuffix(t.Name, "Refusal")
	case *ast.SelectorExpr:
		return isRefusalType(t.Sel)
	case *ast.StarExpr:
		return isRefusalType(t.X)
	}
	return false
}

// refusalConstants returns the exported Refusal* string constants declared in dir's non-test
// files, by name, with their values where they are literals (a constant defined as another
// package's constant is checked there).
func refusalConstants(t *testing.T, fset *token.FileSet, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Refusal") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// TestNoLiteralRefusalNames: the migrated packages build every refusal from a constant, and every
// constant is a valid, distinct refusal name.
func TestNoLiteralRefusalNames(t *testing.T) {
	root, err := devcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, d := range refusalDirs {
		dir := filepath.Join(root, filepath.FromSlash(d))
		for _, l := range literalRefusals(t, fset, dir) {
			rel, _ := filepath.Rel(root, l)
			t.Errorf("literal refusal name (export a RefusalX constant and use it): %s", rel)
		}
		consts := refusalConstants(t, fset, dir)
		if d != "refusal" && d != "ocipack/ocitest" && len(consts) == 0 {
			t.Errorf("%s declares no Refusal* constants", d)
		}
		byValue := map[string][]string{}
		for name, v := range consts {
			if !refusal.Valid(v) {
				t.Errorf("%s.%s = %q is not a valid refusal name", d, name, v)
			}
			byValue[v] = append(byValue[v], name)
		}
		for v, names := range byValue {
			if len(names) > 1 {
				slices.Sort(names)
				t.Errorf("%s: constants %v share the refusal name %q", d, names, v)
			}
		}
	}
}

// TestLiteralRefusalsDetected is the must-fail twin: each literal form is found, a constant is not.
func TestLiteralRefusalsDetected(t *testing.T) {
	const src = `package p
func a() error { return refuse("frame_too_large", "", 0, nil) }
func b() error { return refuse(RefusalFrameTooLarge, "", 0, nil) }
func c() error { return &RefusalError{Name: "digest_required"} }
func d() error { return &snapshot.RefusalError{Name: snapshot.RefusalInvalidUTF8} }
func e() error { return &FeatureRefusedError{Feature: "tasks"} }
var r0, r1 = reason{0, "missing_signature", nil}, reason{1, RefusalUntrustedSignature, nil}
func (m *MismatchError) Refusal() string { return "digest_mismatch" }
func f() Tool { return Tool{Name: "get_forecast"} }
func g() error { return refuse("Not a refusal name", "", 0, nil) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := literalRefusalsIn(fset, f)
	want := []string{
		`p.go:2: refuse(...) with literal "frame_too_large"`,
		`p.go:4: Name: literal "digest_required"`,
		`p.go:6: Feature: literal "tasks"`,
		`p.go:7: reason table literal "missing_signature"`,
		`p.go:8: Refusal() returns literal "digest_mismatch"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
