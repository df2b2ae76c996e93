package managerapp

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// grantKey is one verb on one resource of one API group, held by one component in one scope.
type grantKey struct {
	component, group, resource, verb, scope string
}

func (k grantKey) String() string {
	return fmt.Sprintf("%s: %s %s %s (%s)", k.component, k.verb, k.group, k.resource, k.scope)
}

// roleGrants reads every Role and ClusterRole of config/rbac and config/gateway/rbac (the
// aggregated view/edit roles and the approver role, which are people's rights, excepted) as grant
// keys.
func roleGrants(t *testing.T, root string) map[grantKey]bool {
	t.Helper()
	out := map[grantKey]bool{}
	for _, dir := range []string{"config/rbac", "config/gateway/rbac"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no role files in %s: %v", dir, err)
		}
		for _, f := range files {
			if b := filepath.Base(f); b == "aggregate_roles.yaml" || b == "approver_role.yaml" {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range bytes.Split(raw, []byte("\n---")) {
				var meta struct{ Kind string }
				if err := yaml.Unmarshal(doc, &meta); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if meta.Kind != "Role" && meta.Kind != "ClusterRole" {
					continue
				}
				var role rbacv1.ClusterRole // a Role has the same rules
				if err := yaml.Unmarshal(doc, &role); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				component, scope := "manager", "cluster"
				switch {
				case dir == "config/gateway/rbac":
					component = "gateway"
				case filepath.Base(f) == "metrics_reader_role.yaml":
					component = "metrics scraper"
				}
				switch {
				case meta.Kind == "Role":
					scope = "release namespace"
				case filepath.Base(f) == "credentials_role.yaml":
					scope = "consenting namespaces"
				}
				for _, r := range role.Rules {
					groups, resources := r.APIGroups, r.Resources
					if len(r.NonResourceURLs) > 0 {
						groups, resources = []string{"(non-resource)"}, r.NonResourceURLs
					}
					for _, g := range groups {
						if g == "" {
							g = "core"
						}
						for _, res := range resources {
							for _, v := range r.Verbs {
								out[grantKey{component, g, res, v, scope}] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// docGrants parses the privilege table of docs/security.md (rows "| component | API group |
// resources | verbs | scope | why |") as grant keys. A scope cell is matched by its start
// ("cluster, limited by the admission policy" is "cluster").
func docGrants(doc string) map[grantKey]bool {
	out := map[grantKey]bool{}
	split := func(cell string) []string {
		var l []string
		for _, f := range strings.Split(strings.ReplaceAll(cell, "`", ""), ",") {
			if f = strings.TrimSpace(f); f != "" {
				l = append(l, f)
			}
		}
		return l
	}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 8 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		component := strings.TrimSpace(cells[1])
		if !slices.Contains([]string{"manager", "gateway", "metrics scraper"}, component) {
			continue
		}
		scope := strings.TrimSpace(cells[5])
		for _, s := range []string{"release namespace", "consenting namespaces", "cluster"} {
			if strings.HasPrefix(scope, s) {
				scope = s
			}
		}
		for _, g := range split(cells[2]) {
			for _, res := range split(cells[3]) {
				for _, v := range split(cells[4]) {
					out[grantKey{component, g, res, v, scope}] = true
				}
			}
		}
	}
	return out
}

// privilegeTableProblems compares the roles with the table both ways.
func privilegeTableProblems(roles, doc map[grantKey]bool) []string {
	var out []string
	for k := range roles {
		if !doc[k] {
			out = append(out, "no row for "+k.String())
		}
	}
	for k := range doc {
		if !roles[k] {
			out = append(out, "the table names a right no role grants: "+k.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestSecurityDocListsEveryVerb: every verb of every Role and ClusterRole the operator ships
// (config/rbac, config/gateway/rbac: manager, gateway, leader election, metrics auth, the
// verified-pack store, the gateway's consent role) has a row in docs/security.md's privilege
// table with its scope, and the table names no right that no role grants.
func TestSecurityDocListsEveryVerb(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	roles := roleGrants(t, root)
	if len(roles) < 40 {
		t.Fatalf("only %d grants parsed from the roles", len(roles))
	}
	for _, p := range privilegeTableProblems(roles, docGrants(string(doc))) {
		t.Error(p)
	}
}

// TestSecurityDocCheckCatchesGaps is the twin: a table without the gateway's mcpreverifyrequests
// row, or one that gives the gateway list on Secrets, is caught.
func TestSecurityDocCheckCatchesGaps(t *testing.T) {
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	roles := roleGrants(t, root)
	var kept []string
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "| gateway | `connectors.b10x.io` | mcpreverifyrequests |") {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(strings.Split(string(raw), "\n")) {
		t.Fatal("the table has no gateway mcpreverifyrequests row to remove")
	}
	missing := grantKey{"gateway", "connectors.b10x.io", "mcpreverifyrequests", "create", "cluster"}
	if p := privilegeTableProblems(roles, docGrants(strings.Join(kept, "\n"))); !slices.Contains(p, "no row for "+missing.String()) {
		t.Fatalf("a missing row was not caught: %v", p)
	}
	extra := string(raw) + "\n| gateway | core | secrets | list | cluster | made up |\n"
	wrong := grantKey{"gateway", "core", "secrets", "list", "cluster"}
	if p := privilegeTableProblems(roles, docGrants(extra)); !slices.Contains(p, "the table names a right no role grants: "+wrong.String()) {
		t.Fatalf("a right no role grants was not caught: %v", p)
	}
}
