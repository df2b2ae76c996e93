package activation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// outcomeSite is a stage outcome the controllers build themselves (refuse, retry or a
// StageError literal), read from the source.
type outcomeSite struct {
	pos               string
	condition, reason string
	// class is classRetried, classWaiting, classRefused or "either" (computed at run time).
	class string
}

// apiConstants maps the names of api/v1/conditions.go to their values.
func apiConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "api", "v1", "conditions.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				out[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return out
}

// outcomeSources are the packages whose stages build outcomes themselves: this one (the
// Resolver's profile stages) and the reconcilers (the deployment stages and the credential and
// trust-policy reconcilers, which share the StageError).
var outcomeSources = []string{".", filepath.Join("..", "controllers")}

// outcomeSites finds every outcome built in the non-test sources of outcomeSources.
func outcomeSites(t *testing.T, consts map[string]string) []outcomeSite {
	t.Helper()
	var files []string
	for _, dir := range outcomeSources {
		m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		files = append(files, m...)
	}
	fset := token.NewFileSet()
	var out []outcomeSite
	val := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "v1" {
				return consts[sel.Sel.Name]
			}
		}
		return ""
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || computedOutcomes[fd.Name.Name] {
				continue
			}
			out = append(out, sitesIn(fset, fd, val)...)
		}
	}
	return out
}

// computedOutcomes are the functions that build outcomes from values computed elsewhere: the
// constructors Refuse, Wait and Retry, classify (the rulesets' reasons), and the reconcilers'
// findCollision (one of the three collision reasons, declared under Bound).
var computedOutcomes = map[string]bool{"Refuse": true, "Wait": true, "Retry": true, "classify": true, "findCollision": true}

// constructorClass is the outcome class of each outcome constructor.
var constructorClass = map[string]string{"Refuse": classRefused, "Wait": classWaiting, "Retry": classRetried}

// localName is the name of an identifier or of a selector of package activation
// (activation.Refuse, activation.StageError), else "".
func localName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "activation" {
			return e.Sel.Name
		}
	}
	return ""
}

// sitesIn finds the outcomes built in fd.
func sitesIn(fset *token.FileSet, fd *ast.FuncDecl, val func(ast.Expr) string) []outcomeSite {
	var out []outcomeSite
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if class, ok := constructorClass[localName(n.Fun)]; ok && len(n.Args) >= 2 {
				out = append(out, outcomeSite{pos: fset.Position(n.Pos()).String(), condition: val(n.Args[0]), reason: val(n.Args[1]),
					class: class})
			}
		case *ast.CompositeLit:
			if localName(n.Type) == "StageError" {
				s := outcomeSite{pos: fset.Position(n.Pos()).String(), class: classRefused}
				// flags holds the literal values of Transient and Waiting ("" when absent,
				// "either" when computed).
				flags := map[string]string{}
				for _, el := range n.Elts {
					kv := el.(*ast.KeyValueExpr)
					switch key := kv.Key.(*ast.Ident).Name; key {
					case "Condition":
						s.condition = val(kv.Value)
					case "Reason":
						s.reason = val(kv.Value)
					case "Transient", "Waiting":
						flags[key] = "either"
						if b, ok := kv.Value.(*ast.Ident); ok && (b.Name == "true" || b.Name == "false") {
							flags[key] = b.Name
						}
					}
				}
				switch {
				case flags["Transient"] == "either" || flags["Waiting"] == "either":
					s.class = "either"
				case flags["Transient"] == "true":
					s.class = classRetried
				case flags["Waiting"] == "true":
					s.class = classWaiting
				}
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

// undeclared returns the sites whose outcome is not a decision of its stage in the activation
// table (or names no constant condition and reason).
func undeclared(sites []outcomeSite) []outcomeSite {
	type outcome struct{ condition, reason, class string }
	declared := map[outcome]bool{}
	for _, s := range append(append([]stage(nil), profileStages...), deploymentStages...) {
		for _, d := range s.decides {
			declared[outcome{s.condition, d.reason, d.class()}] = true
		}
	}
	var out []outcomeSite
	for _, s := range sites {
		ok := false
		for _, class := range []string{classRetried, classWaiting, classRefused} {
			if s.class == "either" || s.class == class {
				ok = ok || declared[outcome{s.condition, s.reason, class}]
			}
		}
		if !ok {
			out = append(out, s)
		}
	}
	return out
}

// Every outcome a stage decides itself is declared in the activation table, with its retry, so
// the table (and docs/concepts.md, which shows it) is complete. Twin: an outcome nobody
// declared is found.
func TestStageDecisionsDeclared(t *testing.T) {
	sites := outcomeSites(t, apiConstants(t))
	if len(sites) < 20 {
		t.Fatalf("found only %d outcome sites; the scan is broken", len(sites))
	}
	for _, s := range undeclared(sites) {
		t.Errorf("%s: outcome %s/%s (%s) is not declared in the activation table", s.pos, s.condition, s.reason, s.class)
	}
	bogus := []outcomeSite{{pos: "twin", condition: v1.ConditionBound, reason: v1.ReasonSnapshotDrift, class: classRefused},
		{pos: "twin", condition: v1.ConditionProfileVerified, reason: v1.ReasonProfileNotFound, class: classRefused},
		{pos: "twin", condition: v1.ConditionBound, reason: v1.ReasonGrantDenied, class: classWaiting}}
	if got := undeclared(bogus); len(got) != 3 {
		t.Fatalf("twin: undeclared outcomes passed: %+v", got)
	}
}

// The deployment stages are in the documented order: binding before the live freeze, so that an
// unbound deployment never dials (the reconciler runs them in this order:
// TestDeploymentStagesFollowTheTable in internal/controllers).
func TestDeploymentStageOrder(t *testing.T) {
	want := []string{v1.ConditionProfileVerified, v1.ConditionBound, v1.ConditionSnapshotFrozen, v1.ConditionSnapshotMatched}
	got := conditions(deploymentStages)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stages %v, want %v", got, want)
	}
	if got := conditions(profileStages); strings.Join(got, ",") != v1.ConditionSourceVerified+","+v1.ConditionSnapshotReconstructed {
		t.Fatalf("profile stages %v", got)
	}
}
