package v1

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestProjectFileListsEveryKind: the kubebuilder PROJECT file names exactly the root kinds this
// package declares (every `+kubebuilder:object:root=true` type but the lists), so kubebuilder
// plugins see the whole API.
func TestProjectFileListsEveryKind(t *testing.T) {
	files, err := filepath.Glob("*_types.go")
	if err != nil {
		t.Fatal(err)
	}
	root := regexp.MustCompile(`(?m)^// \+kubebuilder:object:root=true\n(?://.*\n)*type (\w+) struct`)
	var declared []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range root.FindAllStringSubmatch(string(src), -1) {
			if kind := m[1]; !regexp.MustCompile(`List$`).MatchString(kind) {
				declared = append(declared, kind)
			}
		}
	}
	project, err := os.ReadFile(filepath.Join("..", "..", "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^  kind: (\w+)$`).FindAllStringSubmatch(string(project), -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) < 6 || !slices.Equal(declared, listed) {
		t.Fatalf("PROJECT lists kinds %v; api/v1 declares %v", listed, declared)
	}
}
