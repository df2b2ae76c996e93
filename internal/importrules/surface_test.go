package importrules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/devcluster"
)

// publicPackages are the packages a second consumer imports (docs/development.md, "Map of the
// tree"): every other package of the module is under internal/, cmd/, hack/ or test/.
var publicPackages = []string{"api/v1", "snapshot", "mcpclient", "mcpclient/oauth", "egress", "refusal", "ocipack", "admission", "argschema", "drift"}

// librarySurface are exported names of the public packages that nothing else in this module
// uses, kept on purpose: API a second consumer needs (sentinels to match with errors.Is, options,
// constructors) although the operator itself does not call it. Each entry says why. An entry that
// becomes used elsewhere, or whose name no longer exists, fails TestPublicSurfaceIsUsed, so the
// list stays exact.
var librarySurface = map[string]string{
	"mcpclient.EraLegacy":           "the protocol era a consumer reads from Session.Era or pins in its options, matched beside EraModern",
	"mcpclient.EraModern":           "the protocol era a consumer reads from Session.Era or pins in its options, matched beside EraLegacy",
	"api/v1.SchemeBuilder":          "kubebuilder's registration builder behind AddToScheme, the conventional export of an API package",
	"api/v1.ApprovalRequired":       "the value of an operation binding's approval a manifest writes (RequiresApproval reads it), beside ApprovalNone",
	"egress.DefaultFallbackDelay":   "the Happy Eyeballs delay a zero Dialer.FallbackDelay takes, named in its doc",
	"egress.DefaultMaxRequestBytes": "the bound a zero Policy.MaxRequestBytes takes, named in its doc",
	"egress.DefaultMaxHeaderBytes":  "the bound a zero Policy.MaxHeaderBytes takes, named in its doc",
	"egress.MaxRedirectsCap":        "the largest Policy.MaxRedirects NewTransport accepts",
	"egress.LimitRequest":           "a value of TooLargeError.Kind a caller matches",
	"egress.LimitResponse":          "a value of TooLargeError.Kind a caller matches",
	"egress.LimitHeader":            "a value of TooLargeError.Kind a caller matches",
	"egress.NewDialer":              "the guarded dialer for a consumer's own http.Transport (ExampleNewDialer)",
	"refusal.MaxNameLen":            "the bound Valid enforces on a refusal name, for callers naming their own",
}

// surface is what the non-test files of one package declare: its exported package-level names
// (functions, types, vars, consts) and, per name, the exported names of the same package its
// declaration mentions (a type in a signature, a field or a method of a type, a constant's type).
type surface struct {
	names []string
	refs  map[string][]string
}

func exportedNames(t *testing.T, dir string) surface {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	s := surface{refs: map[string][]string{}}
	mentions := func(name string, nodes ...ast.Node) {
		for _, n := range nodes {
			if n == nil || reflect.ValueOf(n).IsNil() {
				continue
			}
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					return false // another package's name
				case *ast.Ident:
					if n.IsExported() && n.Name != name {
						s.refs[name] = append(s.refs[name], n.Name)
					}
				}
				return true
			})
		}
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					s.names = append(s.names, d.Name.Name)
					mentions(d.Name.Name, d.Type)
				} else if recv := receiverType(d.Recv); recv != "" {
					mentions(recv, d.Type) // an exported method belongs to its type's surface
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							s.names = append(s.names, spec.Name.Name)
							mentions(spec.Name.Name, spec.Type)
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() {
								s.names = append(s.names, n.Name)
								mentions(n.Name, spec.Type)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(s.names)
	s.names = slices.Compact(s.names)
	return s
}

// receiverType is the name of a method's receiver type (T for T, *T, T[K] or *T[K]).
func receiverType(recv *ast.FieldList) string {
	if recv == nil || len(recv.List) == 0 {
		return ""
	}
	x := recv.List[0].Type
	if star, ok := x.(*ast.StarExpr); ok {
		x = star.X
	}
	switch x := x.(type) {
	case *ast.IndexExpr:
		x2, _ := x.X.(*ast.Ident)
		if x2 != nil {
			return x2.Name
		}
	case *ast.IndexListExpr:
		x2, _ := x.X.(*ast.Ident)
		if x2 != nil {
			return x2.Name
		}
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// usesOutside returns, per import path of this module, the package-level names that Go files in
// other directories (tests included) select from it: pkg.Name where pkg is the file's name for
// that import.
func usesOutside(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	used := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		local := map[string]string{} // file's name for an import -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			pkg, ok := strings.CutPrefix(p, module+"/")
			if !ok || pkg == filepath.ToSlash(rel) {
				continue
			}
			name := pkg[strings.LastIndex(pkg, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			local[name] = pkg
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				if pkg, ok := local[x.Name]; ok {
					if used[pkg] == nil {
						used[pkg] = map[string]bool{}
					}
					used[pkg][sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// isSentinel reports whether an exported name is one of a library's sentinels, kept for callers
// to match although this module may not: an error value (Err...), an error type (...Error), a
// refusal or warning name constant (Refusal..., Warn...).
func isSentinel(name string) bool {
	return strings.HasPrefix(name, "Err") || strings.HasSuffix(name, "Error") ||
		strings.HasPrefix(name, "Refusal") || strings.HasPrefix(name, "Warn")
}

// unusedSurface reports the exported names of the public packages that are not reachable — used
// by another directory, a sentinel, kept by librarySurface, or mentioned in the declaration of a
// reachable name (a result type, a field's type) — and the librarySurface entries that are stale.
func unusedSurface(decls map[string]surface, used map[string]map[string]bool, keep map[string]string) (unused, stale []string) {
	for _, pkg := range publicPackages {
		d := decls[pkg]
		reached := map[string]bool{}
		var queue []string
		for _, n := range d.names {
			key := pkg + "." + n
			_, kept := keep[key]
			if used[pkg][n] && kept {
				stale = append(stale, key+" (used outside its package: the entry is not needed)")
			}
			if used[pkg][n] || kept || isSentinel(n) {
				reached[n] = true
				queue = append(queue, n)
			}
		}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, r := range d.refs[n] {
				if !reached[r] && slices.Contains(d.names, r) {
					reached[r] = true
					queue = append(queue, r)
				}
			}
		}
		for _, n := range d.names {
			if !reached[n] {
				unused = append(unused, pkg+"."+n)
			}
		}
	}
	for key := range keep {
		pkg, n, _ := strings.Cut(key, ".")
		if !slices.Contains(decls[pkg].names, n) {
			stale = append(stale, key+" (no such exported name)")
		}
	}
	slices.Sort(stale)
	return unused, stale
}

// TestPublicSurfaceIsUsed (issue 22): every exported package-level name of a public package is
// used by another package of this module (a test counts) or is kept in librarySurface with its
// reason. A name nothing uses is unexported instead, so the public surface is what a second
// consumer needs, not what the package happened to export.
func TestPublicSurfaceIsUsed(t *testing.T) {
	root, err := devcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]surface{}
	for _, pkg := range publicPackages {
		names[pkg] = exportedNames(t, filepath.Join(root, filepath.FromSlash(pkg)))
		if len(names[pkg].names) == 0 {
			t.Fatalf("public package %s declares no exported name (moved?)", pkg)
		}
	}
	unused, stale := unusedSurface(names, usesOutside(t, root), librarySurface)
	for _, u := range unused {
		t.Errorf("%s is exported but nothing outside its package uses it: unexport it, or keep it in librarySurface with the reason", u)
	}
	for _, s := range stale {
		t.Errorf("librarySurface entry %s", s)
	}
}

// TestUnusedSurfaceCatchesANewName is the twin: a name nobody uses is reported, a kept one is
// not, and a kept name that is used (or gone) is a stale entry.
func TestUnusedSurfaceCatchesANewName(t *testing.T) {
	names := map[string]surface{"egress": {
		names: []string{"ErrGone", "Kept", "NewTransport", "Orphan", "Result", "Unreached"},
		refs:  map[string][]string{"NewTransport": {"Result"}, "Orphan": {"Unreached"}},
	}}
	used := map[string]map[string]bool{"egress": {"NewTransport": true}}
	unused, stale := unusedSurface(names, used, map[string]string{"egress.Kept": "an option a second consumer sets"})
	if !slices.Equal(unused, []string{"egress.Orphan", "egress.Unreached"}) || len(stale) != 0 {
		t.Fatalf("unused = %v, stale = %v; want egress.Orphan and what only it mentions", unused, stale)
	}
	_, stale = unusedSurface(names, used, map[string]string{"egress.NewTransport": "x", "egress.Gone": "y", "egress.Kept": "z", "egress.Orphan": "w"})
	if len(stale) != 2 {
		t.Fatalf("stale = %v; want the used NewTransport and the missing Gone", stale)
	}
}
