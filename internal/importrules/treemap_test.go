package importrules

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/devcluster"
)

// mapRow is one row of the map of the tree in docs/development.md: a folder (module-relative,
// covering its package and every package below it that no longer row names), what it owns, and
// the packages of this module its packages import.
type mapRow struct {
	Folder  string
	Imports []string
}

const (
	mapStart = "<!-- tree-map:start -->"
	mapEnd   = "<!-- tree-map:end -->"
)

// parseTreeMap reads the rows between the tree-map markers: `| `folder` | owns | `a`, `b` |`,
// "—" for no imports.
func parseTreeMap(doc string) ([]mapRow, error) {
	_, rest, ok := strings.Cut(doc, mapStart)
	if !ok {
		return nil, fmt.Errorf("no %s marker", mapStart)
	}
	table, _, ok := strings.Cut(rest, mapEnd)
	if !ok {
		return nil, fmt.Errorf("no %s marker", mapEnd)
	}
	var rows []mapRow
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // header, separator, prose
		}
		r := mapRow{Folder: strings.Trim(strings.TrimSpace(cells[1]), "`/")}
		for _, imp := range strings.Split(cells[3], ",") {
			if imp = strings.Trim(strings.TrimSpace(imp), "`"); imp != "" && imp != "—" {
				r.Imports = append(r.Imports, imp)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("the tree map has no rows")
	}
	return rows, nil
}

// rowOf returns the row covering a module-relative package: the one with the longest folder that
// is the package or one of its parents.
func rowOf(rows []mapRow, pkg string) (mapRow, bool) {
	best, found := mapRow{}, false
	for _, r := range rows {
		if (pkg == r.Folder || strings.HasPrefix(pkg, r.Folder+"/")) && len(r.Folder) >= len(best.Folder) {
			best, found = r, true
		}
	}
	return best, found
}

// treeMapProblems compares the map with the import graph (module-relative paths, only this
// module's packages and their imports of it): every package has a row, every row covers a
// package, and each row's import column is exactly what its packages import outside the row.
func treeMapProblems(rows []mapRow, graph map[string][]string) []string {
	var problems []string
	covered := map[string]bool{}
	imports := map[string]map[string]bool{}
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		r, ok := rowOf(rows, p)
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no row in the map", p))
			continue
		}
		covered[r.Folder] = true
		for _, imp := range graph[p] {
			if own, _ := rowOf(rows, imp); own.Folder == r.Folder {
				continue
			}
			if imports[r.Folder] == nil {
				imports[r.Folder] = map[string]bool{}
			}
			imports[r.Folder][imp] = true
			if !slices.Contains(r.Imports, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which the row of %s does not list", p, imp, r.Folder))
			}
		}
	}
	for _, r := range rows {
		if !covered[r.Folder] {
			problems = append(problems, fmt.Sprintf("row %s covers no package", r.Folder))
			continue
		}
		for _, imp := range r.Imports {
			if !imports[r.Folder][imp] {
				problems = append(problems, fmt.Sprintf("row %s lists %s, which none of its packages imports", r.Folder, imp))
			}
		}
	}
	return problems
}

// moduleImports narrows the module graph to this module's packages (module-relative) and their
// imports of each other.
func moduleImports(graph map[string][]string) map[string][]string {
	out := map[string][]string{}
	for p, imps := range graph {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			continue
		}
		var mine []string
		for _, imp := range imps {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				mine = append(mine, r)
			}
		}
		out[rel] = mine
	}
	return out
}

// TestTreeMap (issue 22): docs/development.md's map of the tree names every package of the module
// and, per folder, exactly the packages of this module it imports (production code, from
// `go list`).
func TestTreeMap(t *testing.T) {
	root, err := devcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseTreeMap(string(doc))
	if err != nil {
		t.Fatalf("docs/development.md: %v", err)
	}
	for _, p := range treeMapProblems(rows, moduleImports(moduleGraph(t))) {
		t.Errorf("docs/development.md map of the tree: %s", p)
	}
}

// TestTreeMapCatchesDrift is the twin: an unlisted package, an import the row does not list, a
// listed import nothing makes and a row without a package are each reported.
func TestTreeMapCatchesDrift(t *testing.T) {
	doc := "x\n" + mapStart + "\n| folder | owns | imports |\n|---|---|---|\n" +
		"| `refusal` | names | — |\n| `snapshot/` | snapshots | `refusal` |\n" +
		"| `egress` | egress | `refusal`, `snapshot` |\n| `gone` | nothing | — |\n" + mapEnd + "\n"
	rows, err := parseTreeMap(doc)
	if err != nil || len(rows) != 4 || rows[1].Folder != "snapshot" {
		t.Fatalf("rows = %+v, err = %v", rows, err)
	}
	graph := map[string][]string{
		"refusal":        nil,
		"snapshot":       {"refusal"},
		"snapshot/inner": {"snapshot"}, // covered by the snapshot row, an import inside it
		"egress":         {"refusal", "mcpclient"},
		"mcpclient":      {"refusal"},
	}
	got := treeMapProblems(rows, graph)
	want := []string{
		"egress imports mcpclient, which the row of egress does not list",
		"package mcpclient has no row in the map",
		"row egress lists snapshot, which none of its packages imports",
		"row gone covers no package",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := parseTreeMap("no markers"); err == nil {
		t.Fatal("a document without the markers parsed")
	}
}
