package envtest

// The samples of config/samples chain on a default install: applied in their kustomization's
// order with kubectl to a manager started with the chart's default flags, they reach Ready once
// their documented placeholders are replaced, and nothing else of them is changed. What a test
// cannot have (the pack's registry and digest, the team's key, the MCP server, its token and
// host, the namespace) is exactly what the placeholders stand for: a loopback registry holding
// a pack of the sample's reviewed profile signed here, a loopback MCP server listing exactly its
// reviewed tools.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
)

// The sample files of the default install's chain, and the dev-mode inline profile.
const (
	sampleTrustPolicy = "connectors_v1_mcptrustpolicy.yaml"
	sampleBearer      = "connectors_v1_bearer_secret.yaml"
	sampleGrant       = "connectors_v1_invoke_grant.yaml"
)

// The team's repository, branch and builder the samples' trust policy and profile name: the
// pack is attested as built there (they are the team's own values to adapt, not placeholders).
const (
	sampleSourceRepository = "git+https://github.com/example/mcp-profiles"
	sampleSourceRef        = "refs/heads/main"
	sampleBuilderID        = "https://github.com/actions/runner/github-hosted"
)

// samplePlaceholders are, per sample file of the chain, the placeholders its
// "# PLACEHOLDER ID: ..." lines declare and the text of the file each stands for.
var samplePlaceholders = map[string]map[string]string{
	sampleTrustPolicy: {
		"TEAM_NAMESPACE": "values: [team-a]",
		"TEAM_PUBLIC_KEY": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7YyPBqTGrqKP06RptFi0rOYolxzo\n" +
			"      f+LRAG9XV43TuFnY8pAKs9H0E7gTKGqaJzckuyU4PYnggIDN/IDX7a/BFA==",
	},
	sampleOCI:        {"PACK_REF": "registry.example.com/mcp-profiles/weather@sha256:3b5c1f3d8a4e2f6a7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a"},
	sampleBearer:     {"SERVER_TOKEN": "replace-with-your-weather-server-token", "SERVER_HOST": "allowed-hosts: weather.example.com"},
	sampleGrant:      {},
	sampleDeployment: {"SERVER_URL": "https://weather.example.com/mcp"},
}

var placeholderLine = regexp.MustCompile(`(?m)^# PLACEHOLDER ([A-Z_]+): \S`)

// sampleChain returns the files config/samples/kustomization.yaml lists, in its order.
func sampleChain(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	return k.Resources
}

// substituted returns sample file f with each of its placeholders replaced by values[ID]. It
// fails the test if the file declares other placeholders than samplePlaceholders names for it,
// if values does not cover them, or if a placeholder's text is not in the file.
func substituted(t *testing.T, f string, values map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", f))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var declared []string
	for _, m := range placeholderLine.FindAllStringSubmatch(text, -1) {
		declared = append(declared, m[1])
	}
	want := make([]string, 0, len(samplePlaceholders[f]))
	for id := range samplePlaceholders[f] {
		want = append(want, id)
	}
	sort.Strings(declared)
	sort.Strings(want)
	if !slices.Equal(declared, want) {
		t.Fatalf("%s declares the placeholders %v, the test replaces %v", f, declared, want)
	}
	for id, old := range samplePlaceholders[f] {
		v, ok := values[id]
		if !ok {
			t.Fatalf("no value for placeholder %s of %s", id, f)
		}
		if !strings.Contains(text, old) {
			t.Fatalf("%s: placeholder %s (%q) is not in the file", f, id, old)
		}
		text = strings.ReplaceAll(text, old, v)
	}
	return []byte(text)
}

// chartDefaultOptions are the manager's options from the flags the chart renders with its
// default values for a release in ns, parsed as cmd/manager parses them. Two things differ, both
// because this test's fakes run on this machine: loopback is reachable (the registry and the MCP
// server listen there), and every fetch of the keyless trusted root is refused and counted in
// fetches before anything is dialed (the default, public-good Sigstore's TUF repository, is off
// this machine; a key-signed chain must not need it).
func chartDefaultOptions(t *testing.T, ns string, fetches *atomic.Int64) managerapp.Options {
	t.Helper()
	var args []string
	for _, o := range objects(t, render(t, "samples", ns, nil)) {
		if o.GetKind() == "Deployment" && o.GetName() == "samples-connector-mcp" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args = asStrings(cs[0].(map[string]any)["args"])
		}
	}
	if len(args) == 0 {
		t.Fatal("the chart renders no manager args")
	}
	fs, o := managerFlagSet()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the chart's default manager args do not parse: %v", err)
	}
	if o.SkipProvenanceUnsafe || o.KeylessWithoutTlogUnsafe || o.TrustedRootTUFURL != "" || o.TrustedRootPath != "" {
		t.Fatalf("the chart's defaults waive checks or name a trusted root: %v", args)
	}
	o.AllowLoopbackUnsafe = true
	o.BeforeTrustedRootFetch = func(string) error {
		fetches.Add(1)
		return errors.New("the samples story fetches no trusted root")
	}
	return *o
}

// sampleWorld is what the placeholders stand for in this test: a loopback registry with a pack of
// the sample's reviewed profile signed by a team key, a loopback MCP server listing exactly its
// reviewed tools behind a bearer token, and the values of every placeholder.
type sampleWorld struct {
	values map[string]string
	// authorized counts the requests the MCP server accepted (with the sample Secret's token).
	authorized atomic.Int64
	packRef    string
}

func newSampleWorld(t *testing.T, ns string) *sampleWorld {
	t.Helper()
	// The reviewed document: the inline sample's (the OCI sample's pack holds the same).
	raw, err := json.Marshal(loadSample(t, sampleInline).Object["spec"].(map[string]any)["source"].(map[string]any)["inline"])
	if err != nil {
		t.Fatal(err)
	}
	var doc apiv1.ProfileDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if err := ocipack.Validate(&doc); err != nil {
		t.Fatalf("the sample's profile document: %v", err)
	}
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	client := &ociregistry.Client{PlainHTTP: true}
	repo, err := ociregistry.ParseRepository(reg.Host + "/mcp-profiles/weather")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := client.Push(context.Background(), repo, []*apiv1.ProfileDocument{&doc})
	if err != nil {
		t.Fatal(err)
	}
	key := newTeamSigner(t)
	if _, err := key.signer.Sign(context.Background(), client, ref, &ociregistry.Provenance{
		SourceRepository: sampleSourceRepository, SourceRef: sampleSourceRef, SourceRevision: packRevision, BuilderID: sampleBuilderID}); err != nil {
		t.Fatal(err)
	}
	w := &sampleWorld{packRef: ref.String()}

	// The MCP server: the reviewed descriptors byte for byte, only with the bearer token.
	const token = "sample-token-5d1c"
	tools := make([]json.RawMessage, len(doc.Snapshot.Tools))
	for i, tool := range doc.Snapshot.Tools {
		tools[i] = json.RawMessage(tool.Descriptor.Raw)
	}
	server := &mcptest.Raw{Era: mcptest.Modern, Tools: tools}
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.authorized.Add(1)
		server.ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)

	pemLines := strings.Split(strings.TrimSpace(key.pem), "\n")
	w.values = map[string]string{
		"TEAM_NAMESPACE":  "values: [" + ns + "]",
		"TEAM_PUBLIC_KEY": strings.Join(pemLines[1:len(pemLines)-1], "\n      "),
		"PACK_REF":        w.packRef,
		"SERVER_TOKEN":    token,
		"SERVER_HOST":     "allowed-hosts: 127.0.0.1",
		"SERVER_URL":      ts.URL + "/mcp",
	}
	return w
}

// applyChain applies the chain's files, except those in skip, in the kustomization's order with
// kubectl, each with its placeholders replaced.
func (w *sampleWorld) applyChain(t *testing.T, ns string, skip ...string) {
	t.Helper()
	for _, f := range sampleChain(t) {
		if slices.Contains(skip, f) {
			continue
		}
		if out, err := kubectlRun(t, substituted(t, f, w.values), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", f, err, out)
		}
	}
}

// TestSamplesChainOnADefaultInstall: the kustomization lists exactly the files whose placeholders
// the test knows, docs/install.md names every placeholder, and the chain applied in order to a
// manager with the chart's default flags is Ready: the trust policy valid, the profile verified
// through it by the team's key (with the keyless signer beside it, and no trusted root fetched),
// the deployment frozen through the Secret's bearer and bound by the grant.
func TestSamplesChainOnADefaultInstall(t *testing.T) {
	chain := sampleChain(t)
	files := make([]string, 0, len(samplePlaceholders))
	for f := range samplePlaceholders {
		files = append(files, f)
	}
	listed := slices.Clone(chain)
	sort.Strings(listed)
	sort.Strings(files)
	if !slices.Equal(listed, files) {
		t.Fatalf("config/samples/kustomization.yaml lists %v, the test knows the placeholders of %v", chain, files)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range samplePlaceholders {
		for id := range ids {
			if !strings.Contains(string(doc), "`"+id+"`") {
				t.Errorf("docs/install.md does not name the samples' placeholder %s", id)
			}
		}
	}

	ns := newNamespace(t, "samples-chain")
	var fetches atomic.Int64
	startOperator(t, ns, chartDefaultOptions(t, ns, &fetches))
	w := newSampleWorld(t, ns)
	w.applyChain(t, ns)

	policy := waitObj(t, &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-signers"}}, storyTimeout, "Ready", isReady[*apiv1.McpTrustPolicy])
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	prof := waitObj(t, &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}, storyTimeout, "Ready", isReady[*apiv1.McpServiceProfile])
	if v := prof.Status.Verified; v == nil || v.TrustSource != "McpTrustPolicy/team-signers" || v.Signer != "team-key" ||
		v.SourceRepository != sampleSourceRepository || v.SourceRef != sampleSourceRef || len(v.WaivedChecks) != 0 {
		t.Fatalf("the sample profile verified as %+v", v)
	}
	sd := waitObj(t, &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])
	if sd.Status.ActiveSnapshotDigest != prof.Status.SnapshotDigest || w.authorized.Load() == 0 {
		t.Fatalf("deployment %+v after %d authorized requests", sd.Status, w.authorized.Load())
	}
	for _, o := range []clientObject{policy, prof, sd} {
		if s := kstatusOf(t, o); s != status.CurrentStatus {
			t.Errorf("%s %s: kstatus %s", kindName(o), o.GetName(), s)
		}
	}
	if n := fetches.Load(); n != 0 {
		t.Fatalf("the key-signed chain fetched the keyless trusted root %d times", n)
	}
}

// TestSamplesWithoutGrantAreRefused is the twin: the same chain without the grant file stops at
// Bound with GrantNotFound.
func TestSamplesWithoutGrantAreRefused(t *testing.T) {
	ns := newNamespace(t, "samples-nogrant")
	var fetches atomic.Int64
	startOperator(t, ns, chartDefaultOptions(t, ns, &fetches))
	w := newSampleWorld(t, ns)
	w.applyChain(t, ns, sampleGrant)
	t.Cleanup(func() {
		_ = k8sClient.Delete(context.Background(), &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-signers"}})
	})
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}
	waitObj(t, sd, storyTimeout, "GrantNotFound", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonGrantNotFound)
	})
}

// TestSampleInlineProfileIsDevelopmentOnly is the twin of the profile: the inline sample in place
// of the OCI one is refused by a default install (InlineSourceRefused), and accepted by a
// development manager (--skip-provenance-unsafe) that then binds the sample deployment with the
// sample grant.
func TestSampleInlineProfileIsDevelopmentOnly(t *testing.T) {
	ns := newNamespace(t, "samples-inline")
	var fetches atomic.Int64
	startOperator(t, ns, chartDefaultOptions(t, ns, &fetches))
	applySamples(t, ns, sampleInline)
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}
	waitObj(t, prof, storyTimeout, "InlineSourceRefused", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonInlineSourceRefused)
	})

	dev := newNamespace(t, "samples-dev")
	startOperator(t, dev, devOptions())
	applySamples(t, dev, sampleInline, sampleGrant, sampleDeployment)
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "weather"}}
	waitObj(t, sd, storyTimeout, "Bound", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionTrue, apiv1.ReasonSucceeded)
	})
}

// applySamples applies config/samples files into ns with kubectl, unchanged.
func applySamples(t *testing.T, ns string, files ...string) {
	t.Helper()
	for _, f := range files {
		if out, err := kubectlRun(t, nil, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
}
