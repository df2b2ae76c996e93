package activation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docTableRows parses the activation table of docs/concepts.md (between its markers) into
// "kind|stage|condition|reason|class" rows, header and separator left out.
func docTableRows(doc string) ([]string, error) {
	_, rest, ok := strings.Cut(doc, "<!-- activation-table:begin -->")
	if !ok {
		return nil, fmt.Errorf("no activation-table:begin marker")
	}
	body, _, ok := strings.Cut(rest, "<!-- activation-table:end -->")
	if !ok {
		return nil, fmt.Errorf("no activation-table:end marker")
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			return nil, fmt.Errorf("not a table line: %q", line)
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
		}
		if len(cells) != 5 {
			return nil, fmt.Errorf("want 5 cells: %q", line)
		}
		if cells[0] == "kind" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, strings.Join(cells, "|"))
	}
	return rows, nil
}

// codeTableRows renders activationTable the way the doc writes it: stages numbered per kind in
// the order they run, with the outcome class (retried, waiting, refused).
func codeTableRows() []string {
	var rows []string
	n := map[string]int{}
	last := map[string]string{}
	for _, r := range activationTable() {
		if last[r.kind] != r.condition {
			n[r.kind]++
			last[r.kind] = r.condition
		}
		rows = append(rows, fmt.Sprintf("%s|%d|%s|%s|%s", r.kind, n[r.kind], r.condition, r.reason, r.class))
	}
	return rows
}

// diffRows returns a description of the first difference, or "".
func diffRows(doc, code []string) string {
	for i := 0; i < max(len(doc), len(code)); i++ {
		var d, c string
		if i < len(doc) {
			d = doc[i]
		}
		if i < len(code) {
			c = code[i]
		}
		if d != c {
			return fmt.Sprintf("row %d: docs/concepts.md has %q, the code %q", i+1, d, c)
		}
	}
	return ""
}

// docs/concepts.md shows the activation table exactly as table.go and rules.go have it, in the
// order the code runs it. Twin: a doc with two rows swapped, or a class changed, differs.
func TestConceptsTableMatchesCode(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "concepts.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := docTableRows(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	code := codeTableRows()
	if d := diffRows(doc, code); d != "" {
		t.Fatalf("the activation table in docs/concepts.md is not the code's: %s", d)
	}

	swapped := append([]string(nil), doc...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if diffRows(swapped, code) == "" {
		t.Fatal("twin: swapped rows were not noticed")
	}
	flipped := strings.Replace(string(raw), "| `ServerUnreachable` | retried |", "| `ServerUnreachable` | refused |", 1)
	if flipped == string(raw) {
		t.Fatal("twin: the doc has no ServerUnreachable row to flip")
	}
	if rows, err := docTableRows(flipped); err != nil || diffRows(rows, code) == "" {
		t.Fatalf("twin: a changed class was not noticed (%v)", err)
	}
}
