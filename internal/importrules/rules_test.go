package importrules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/devcluster"
)

const module = devcluster.ModulePath

// rule forbids packages matching From to depend on packages matching To: transitively, or with
// Direct only by their own imports (a package may then reach To through a permitted one). A
// pattern "p/..." matches p and every package below it; "p" matches p only.
type rule struct {
	Name   string
	From   []string
	Except []string // From packages the rule does not apply to
	To     []string
	Direct bool
}

var kubernetes = []string{"k8s.io/client-go/...", "sigs.k8s.io/controller-runtime/..."}

// registryAndSigstore are the libraries that fetch and verify packs: only the resolver's
// verifier and the CLI link them.
var registryAndSigstore = []string{
	"github.com/sigstore/...", "oras.land/...", "github.com/google/go-containerregistry/...",
	"github.com/theupdateframework/...", "github.com/in-toto/...", "github.com/secure-systems-lab/...",
}

// testDoubles are the module's test servers and harnesses: no binary links them.
var testDoubles = []string{
	module + "/internal/mcptest/...", module + "/internal/ocitest/...", module + "/internal/oauthtest/...",
	module + "/internal/devcluster/...", module + "/internal/writecount/...",
}

// foundation are the public packages (and the internal wire layer under mcpclient): the MCP
// client foundation a second consumer imports without Kubernetes.
var foundation = []string{
	module + "/api/...", module + "/snapshot/...", module + "/mcpclient/...", module + "/egress/...",
	module + "/refusal/...", module + "/ocipack/...", module + "/internal/wire/...", module + "/internal/netcause/...",
	module + "/admission/...", module + "/argschema/...", module + "/drift/...",
}

// operator are the operator's packages: the foundation never depends on them (its own
// internal/wire is not one of them).
var operator = []string{
	module + "/internal/activation/...", module + "/internal/controllers/...", module + "/internal/gateway/...",
	module + "/internal/invocation/...", module + "/internal/review/...", module + "/internal/k8sbinding/...",
	module + "/internal/managerapp/...", module + "/internal/gatewayapp/...", module + "/internal/appoptions/...",
	module + "/internal/packstore/...", module + "/internal/oauthk8s/...", module + "/internal/ociregistry/...",
	module + "/internal/provenance/...", module + "/cmd/...",
}

// rules are the module's layering rules: the intended architecture of docs/development.md's map
// of the tree, each a case of TestImportRules.
var rules = []rule{
	{
		Name: "no_kubernetes_below_controllers",
		From: foundation,
		To:   kubernetes,
	},
	{
		Name: "mcpclient_is_handed_its_port",
		From: []string{module + "/mcpclient/...", module + "/internal/wire/..."},
		To:   []string{module + "/egress/..."},
	},
	{
		// The wire layer both direct paths share reads JSON with the strict scanner and nothing
		// else of the module: snapshot and refusal (below it) are all it may reach.
		Name: "the_wire_layer_stands_on_snapshot_alone",
		From: []string{module + "/internal/wire/..."},
		To: []string{module + "/api/...", module + "/mcpclient/...", module + "/egress/...",
			module + "/ocipack/...", module + "/admission/...", module + "/argschema/...",
			module + "/drift/...", module + "/internal/...", module + "/cmd/...", module + "/test/..."},
	},
	{
		Name: "refusal_is_a_leaf",
		From: []string{module + "/refusal/...", module + "/internal/netcause/..."},
		To:   []string{module + "/..."},
	},
	{
		Name: "the_foundation_knows_no_operator",
		From: foundation,
		To:   operator,
	},
	{
		Name: "the_pack_format_carries_no_registry",
		From: []string{module + "/ocipack/...", module + "/internal/activation/..."},
		To:   registryAndSigstore,
	},
	{
		Name: "the_request_path_carries_no_sigstore",
		From: []string{module + "/internal/invocation/...", module + "/internal/gateway/..."},
		To:   registryAndSigstore,
	},
	{
		Name:   "nothing_imports_the_reconcilers",
		From:   []string{module + "/..."},
		Except: []string{module + "/internal/controllers/...", module + "/internal/managerapp/...", module + "/test/..."},
		To:     []string{module + "/internal/controllers/..."},
		Direct: true,
	},
	{
		Name: "the_gateway_is_not_the_manager",
		From: []string{module + "/internal/gateway/...", module + "/internal/gatewayapp/...", module + "/cmd/gateway/..."},
		To:   []string{module + "/internal/controllers/...", module + "/internal/managerapp/..."},
	},
	{
		Name: "review_and_invocation_know_no_activation",
		From: []string{module + "/internal/review/...", module + "/internal/invocation/..."},
		To: []string{module + "/internal/activation/...", module + "/internal/controllers/...",
			module + "/internal/gateway/...", module + "/internal/managerapp/...", module + "/internal/gatewayapp/..."},
	},
	{
		Name:   "composition_roots_only_under_cmd",
		From:   []string{module + "/..."},
		Except: []string{module + "/cmd/...", module + "/test/..."},
		To:     []string{module + "/internal/managerapp/...", module + "/internal/gatewayapp/..."},
		Direct: true,
	},
	{
		Name: "binaries_link_no_test_doubles",
		From: []string{module + "/cmd/..."},
		To:   testDoubles,
	},
}

// allowed are known violations being removed by work in flight. Each entry names the rule, the
// importing package and the forbidden package it reaches, and why it is still here. An entry that
// no longer matches a violation fails the test, so it is deleted as soon as the code is fixed.
var allowed = []violation{}

// pkg is the part of `go list -json` output the rules need.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// violation is one package reaching a forbidden one; Chain is an import path from From to To.
type violation struct {
	Rule, From, To string
	Chain          []string
}

func (v violation) String() string {
	return fmt.Sprintf("%s: %s depends on %s (%s)", v.Rule, v.From, v.To, strings.Join(v.Chain, " -> "))
}

func matches(patterns []string, path string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// check applies rules to an import graph (import path -> direct imports). It reports, per rule and
// subject package, each forbidden package it reaches with one import chain, in a stable order.
func check(graph map[string][]string, rules []rule) []violation {
	subjects := make([]string, 0, len(graph))
	for p := range graph {
		subjects = append(subjects, p)
	}
	slices.Sort(subjects)
	var out []violation
	for _, r := range rules {
		for _, from := range subjects {
			if !matches(r.From, from) || matches(r.Except, from) {
				continue
			}
			// Breadth-first from the subject, remembering how each package was reached.
			prev := map[string]string{from: ""}
			queue := []string{from}
			var hits []string
			for len(queue) > 0 {
				cur := queue[0]
				queue = queue[1:]
				for _, next := range graph[cur] {
					if _, seen := prev[next]; seen {
						continue
					}
					prev[next] = cur
					if next != from && matches(r.To, next) {
						hits = append(hits, next)
						continue // report the first forbidden package on a path, not what it imports
					}
					if !r.Direct {
						queue = append(queue, next)
					}
				}
			}
			slices.Sort(hits)
			for _, to := range hits {
				chain := []string{to}
				for p := prev[to]; p != ""; p = prev[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				out = append(out, violation{Rule: r.Name, From: from, To: to, Chain: chain})
			}
		}
	}
	return out
}

// filter removes the allowed violations and returns the rest, plus the allow-list entries that
// matched nothing (stale).
func filter(vs []violation, allow []violation) (rest []violation, stale []violation) {
	used := make([]bool, len(allow))
	for _, v := range vs {
		ok := false
		for i, a := range allow {
			if a.Rule == v.Rule && a.From == v.From && a.To == v.To {
				used[i], ok = true, true
			}
		}
		if !ok {
			rest = append(rest, v)
		}
	}
	for i, a := range allow {
		if !used[i] {
			stale = append(stale, a)
		}
	}
	return rest, stale
}

// moduleGraph runs `go list -deps -json ./...` at the module root and returns the import graph of
// every non-standard package (production code: test imports are not followed).
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	root, err := devcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Imports,Standard", "./...")
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(&stdout)
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if !p.Standard {
			graph[p.ImportPath] = p.Imports
		}
	}
	if _, ok := graph[module+"/mcpclient"]; !ok {
		t.Fatalf("go list output has no %s/mcpclient: %d packages", module, len(graph))
	}
	return graph
}

// TestImportRules: the module as it is keeps every layering rule (apart from the commented,
// temporary allow-list entries, each of which must still be needed).
func TestImportRules(t *testing.T) {
	rest, stale := filter(check(moduleGraph(t), rules), allowed)
	for _, v := range rest {
		t.Errorf("import rule broken: %s", v)
	}
	for _, a := range stale {
		t.Errorf("allow-list entry no longer needed, delete it from allowed: %s: %s -> %s", a.Rule, a.From, a.To)
	}
}

// TestCheckFindsViolations: the checker reports a forbidden dependency, direct or transitive, with
// its chain (the must-fail twin of TestImportRules), honours Except, and does not report the
// allowed shapes.
func TestCheckFindsViolations(t *testing.T) {
	graph := map[string][]string{
		module + "/snapshot":             {module + "/refusal"},
		module + "/refusal":              nil,
		module + "/mcpclient":            {module + "/snapshot", module + "/mcpclient/helper"},
		module + "/mcpclient/helper":     {"example.com/lib"},
		"example.com/lib":                {"k8s.io/client-go/rest"},
		"k8s.io/client-go/rest":          {"k8s.io/apimachinery/pkg/runtime"},
		module + "/egress":               {module + "/refusal"},
		module + "/internal/k8sbinding":  {module + "/egress", "sigs.k8s.io/controller-runtime/pkg/client"},
		module + "/api/v1":               {"k8s.io/apimachinery/pkg/runtime"},
		module + "/internal/controllers": {module + "/internal/k8sbinding", module + "/mcpclient"},
	}
	got := check(graph, rules)
	want := []string{
		"no_kubernetes_below_controllers: " + module + "/mcpclient depends on k8s.io/client-go/rest (" +
			module + "/mcpclient -> " + module + "/mcpclient/helper -> example.com/lib -> k8s.io/client-go/rest)",
		"no_kubernetes_below_controllers: " + module + "/mcpclient/helper depends on k8s.io/client-go/rest (" +
			module + "/mcpclient/helper -> example.com/lib -> k8s.io/client-go/rest)",
	}
	if len(got) != len(want) {
		t.Fatalf("check found %d violations, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("violation %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}

	t.Run("mcpclient reaching egress", func(t *testing.T) {
		g := map[string][]string{module + "/mcpclient/oauth": {module + "/egress"}, module + "/egress": nil}
		vs := check(g, rules)
		if len(vs) != 1 || vs[0].Rule != "mcpclient_is_handed_its_port" || vs[0].To != module+"/egress" {
			t.Fatalf("violations = %v, want mcpclient_is_handed_its_port to egress", vs)
		}
	})
	t.Run("a direct rule judges only a package's own imports", func(t *testing.T) {
		g := map[string][]string{
			module + "/cmd/manager":          {module + "/internal/managerapp"},
			module + "/internal/managerapp":  {module + "/internal/controllers"},
			module + "/internal/controllers": {module + "/internal/activation"},
			module + "/internal/gateway":     {module + "/internal/activation", module + "/internal/controllers"},
			module + "/internal/activation":  nil,
		}
		var direct []rule
		for _, r := range rules {
			if r.Name == "nothing_imports_the_reconcilers" {
				direct = append(direct, r)
			}
		}
		vs := check(g, direct)
		if len(direct) != 1 || len(vs) != 1 || vs[0].From != module+"/internal/gateway" {
			t.Fatalf("violations = %v, want only the gateway importing the reconcilers", vs)
		}
	})
	t.Run("the request path reaching sigstore through the pack format", func(t *testing.T) {
		g := map[string][]string{
			module + "/internal/gateway":    {module + "/internal/invocation"},
			module + "/internal/invocation": {module + "/ocipack"},
			module + "/ocipack":             {"github.com/sigstore/sigstore-go/pkg/verify"},
		}
		var names []string
		for _, v := range check(g, rules) {
			names = append(names, v.Rule+" "+v.From)
		}
		slices.Sort(names)
		want := []string{
			"the_pack_format_carries_no_registry " + module + "/ocipack",
			"the_request_path_carries_no_sigstore " + module + "/internal/gateway",
			"the_request_path_carries_no_sigstore " + module + "/internal/invocation",
		}
		if !slices.Equal(names, want) {
			t.Fatalf("violations = %v, want %v", names, want)
		}
	})
	t.Run("refusal importing the module", func(t *testing.T) {
		g := map[string][]string{module + "/refusal": {module + "/snapshot"}, module + "/snapshot": nil}
		vs := check(g, rules)
		if len(vs) != 1 || vs[0].Rule != "refusal_is_a_leaf" {
			t.Fatalf("violations = %v, want refusal_is_a_leaf", vs)
		}
	})
}

// TestFilter: an allow-list entry hides exactly its violation, and an entry matching nothing is
// reported as stale.
func TestFilter(t *testing.T) {
	v := violation{Rule: "r", From: "a", To: "b"}
	other := violation{Rule: "r", From: "a", To: "c"}
	rest, stale := filter([]violation{v, other}, []violation{{Rule: "r", From: "a", To: "b"}})
	if len(rest) != 1 || rest[0].To != "c" || len(stale) != 0 {
		t.Fatalf("rest = %v, stale = %v; want only a -> c and no stale entry", rest, stale)
	}
	rest, stale = filter(nil, []violation{{Rule: "r", From: "a", To: "b"}})
	if len(rest) != 0 || len(stale) != 1 {
		t.Fatalf("rest = %v, stale = %v; want the unused entry reported stale", rest, stale)
	}
}
