package managerapp

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/install.md names the manager's Secrets verbs; they are exactly those of its ClusterRole
// (config/rbac, which the chart's rules equal: TestStoryChartMatchesGeneratedManifests). Twin: the sentence the
// docs had before ("Secrets are `get` only") would not match.
func TestInstallDocNamesTheSecretsVerbs(t *testing.T) {
	root := filepath.Join("..", "..")
	var held []string
	for k := range roleGrants(t, root) {
		if k.component == "manager" && k.group == "core" && k.resource == "secrets" && k.scope == "cluster" {
			held = append(held, k.verb)
		}
	}
	slices.Sort(held)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	verbs := func(text string) []string {
		m := regexp.MustCompile("Secrets verbs are ((?:`[a-z]+`,?\\s*)+)").FindStringSubmatch(text)
		if m == nil {
			return nil
		}
		var out []string
		for _, v := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[1], -1) {
			out = append(out, v[1])
		}
		slices.Sort(out)
		return out
	}
	if got := verbs(strings.ReplaceAll(string(doc), "\n  ", " ")); !slices.Equal(got, held) {
		t.Fatalf("docs/install.md names the manager's Secrets verbs %v; its ClusterRole holds %v", got, held)
	}
	if got := verbs("Secrets verbs are `get` only"); slices.Equal(got, held) {
		t.Fatal("twin: the old sentence matched")
	}
}
