package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceIsCurrent fails when docs/crd-reference.md no longer matches the generated CRDs:
// run `make manifests` after changing api/v1.
func TestReferenceIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	got, err := render(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "crd-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/crd-reference.md is stale; run `make manifests`")
	}
}

// TestReferenceFollowsTheSchema is the twin: a field added to a CRD shows up as a row with its
// constraints, and a CRD directory without CRDs is an error.
func TestReferenceFollowsTheSchema(t *testing.T) {
	dir := t.TempDir()
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, listKind: WidgetList, singular: widget, shortNames: [wdg]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size:
                type: string
                description: Size of the widget.
                enum: [small, large]
              tags:
                type: array
                maxItems: 3
                items: {type: string, maxLength: 8}
`
	if err := os.WriteFile(filepath.Join(dir, "widget.yaml"), []byte(crd), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := render(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Widget",
		"short names `wdg`",
		"| `spec.size` | string | yes | one of `small`, `large` | Size of the widget. |",
		"| `spec.tags[]` | []string |  | max items 3; items: max length 8 |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendered reference lacks %q:\n%s", want, out)
		}
	}
	if _, err := render(t.TempDir()); err == nil {
		t.Error("an empty CRD directory rendered without error")
	}
}
