package envtest

// The Helm chart: schema, lint, the values matrix, and every rendered object validated by the real
// apiserver (server-side dry run) in a namespace that enforces restricted Pod Security.

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/b10x/connector-mcp/internal/managerapp"
)

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// helm returns the pinned helm binary, installed by hack/tools.sh (as in CI) on first use.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		out, err := exec.CommandContext(context.Background(), filepath.Join(repoRoot, "hack", "tools.sh"), "--path", "helm").Output()
		helmBin, helmErr = strings.TrimSpace(string(out)), err
	})
	if helmErr != nil {
		t.Fatalf("hack/tools.sh --path helm: %v", helmErr)
	}
	return helmBin
}

func chartDir() string { return filepath.Join(repoRoot, "charts", "connector-mcp") }

// helmRun runs helm with a values file holding values (may be nil) and returns its combined output.
func helmRun(t *testing.T, values map[string]any, args ...string) (string, error) {
	t.Helper()
	if values != nil {
		raw, err := yaml.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	cmd := exec.CommandContext(context.Background(), helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// render runs `helm template` and fails the test if it fails.
func render(t *testing.T, release, ns string, values map[string]any) string {
	t.Helper()
	out, err := helmRun(t, values, "template", release, chartDir(), "--namespace", ns)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return out
}

// objects splits rendered YAML into objects.
func objects(t *testing.T, rendered string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(rendered, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// auditWebhookValues send the audit trail to a webhook with a bearer Secret.
var auditWebhookValues = map[string]any{"sink": "https://audit.example.com/ingest", "webhookBearerSecret": map[string]any{"name": "audit-token"}}

// chartMatrix is the values matrix CI lints, renders and dry-runs.
var chartMatrix = map[string]map[string]any{
	"defaults": nil,
	"gateway": {"gateway": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gateway-tls"},
		"authzCacheTTL": "10s", "tokenCacheTTL": "1m", "callTimeout": "30s", "maxInflight": 256, "maxInflightPerCaller": 16,
		"maxRequestBytes": 1048576, "allowedHosts": []string{"mcp.example.com"}}},
	"gateway-plain-http": {"gateway": map[string]any{"enabled": true, "plainHTTPUnsafe": true}},
	"keyless": {"policy": map[string]any{
		"defaultIdentity":      map[string]any{"issuer": "https://token.actions.githubusercontent.com", "subjectRegExp": `^https://github\.com/example/profiles/\.github/workflows/[^@]+@refs/heads/main$`},
		"trustedRootConfigMap": "sigstore-trusted-root",
		"defaultProvenance":    map[string]any{"builderID": "https://github.com/actions/runner/github-hosted", "sourceRepository": "git+https://github.com/example/profiles", "sourceRef": "refs/heads/main"},
	}},
	"key":          {"policy": map[string]any{"defaultPublicKey": map[string]any{"secretName": "profiles-signing-key", "key": "cosign.pub"}}},
	"egress-cidrs": {"policy": map[string]any{"egressAllowCIDRs": []string{"10.96.0.0/12", "fd00::/8"}}},
	"monitoring": {"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true},
		"dashboards": map[string]any{"enabled": true},
		"caBundle":   map[string]any{"configMapName": "corp-ca"}, "priorityClassName": "system-cluster-critical",
		"image":   map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
		"gateway": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gateway-tls"}}},
	// Gateway TLS from cert-manager, and the callers' CA bundle from trust-manager.
	"gateway-cert-manager": {"gateway": map[string]any{"enabled": true, "tls": map[string]any{
		"certManager":    map[string]any{"issuerRef": map[string]any{"name": "platform-ca", "kind": "ClusterIssuer"}, "duration": "2160h", "renewBefore": "360h"},
		"callerCABundle": map[string]any{"trustManager": true}}}},
	// Every escape hatch at once.
	"overrides": overrideValues,
	// Values with YAML syntax in them reach their flags unchanged.
	"yaml-syntax-values": yamlSyntaxValues,
	// The audit trail's webhook sink, its bearer Secret mounted into the manager and the gateway.
	"audit-webhook": {"audit": auditWebhookValues, "gateway": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gateway-tls"}}},
	"minimal": {"metrics": map[string]any{"enabled": false}, "leaderElection": false, "replicaCount": 1,
		"podDisruptionBudget": map[string]any{"enabled": false}, "networkPolicy": map[string]any{"enabled": false},
		"rbac": map[string]any{"aggregateToDefaultRoles": false}},
}

func matrixNames() []string {
	names := make([]string, 0, len(chartMatrix))
	for n := range chartMatrix {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestChartLintStrict: `helm lint --strict` is clean for the defaults and every matrix entry.
func TestChartLintStrict(t *testing.T) {
	for _, name := range matrixNames() {
		t.Run(name, func(t *testing.T) {
			if out, err := helmRun(t, chartMatrix[name], "lint", "--strict", chartDir()); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
		})
	}
}

// TestChartSchemaRefusals is the twin: unknown keys, wrong types and bad formats are refused by
// values.schema.json, naming the offending value.
func TestChartSchemaRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"unknown top-level key", map[string]any{"replicas": 2}, "additional properties 'replicas' not allowed"},
		{"unknown nested key", map[string]any{"policy": map[string]any{"requireProvenanceUnsafe": false}}, "additional properties 'requireProvenanceUnsafe' not allowed"},
		{"unknown gateway key", map[string]any{"gateway": map[string]any{"tlsSecret": "x"}}, "additional properties 'tlsSecret' not allowed"},
		{"wrong type", map[string]any{"replicaCount": "two"}, "replicaCount"},
		{"tag as digest", map[string]any{"image": map[string]any{"digest": "latest"}}, "digest"},
		{"bad duration", map[string]any{"policy": map[string]any{"reverifyInterval": "10 minutes"}}, "reverifyInterval"},
		{"bad CIDR", map[string]any{"policy": map[string]any{"egressAllowCIDRs": []string{"10.0.0.0"}}}, "egressAllowCIDRs"},
		{"drift webhook over plain http", map[string]any{"driftWebhook": map[string]any{"url": "http://hooks.example.com/drift"}}, "driftWebhook/url"},
		{"drift webhook token in the URL", map[string]any{"driftWebhook": map[string]any{"url": "https://hooks.example.com/drift?token=x"}}, "driftWebhook/url"},
		{"audit webhook over plain http", map[string]any{"audit": map[string]any{"sink": "http://audit.example.com/ingest"}}, "audit/sink"},
		{"audit webhook token in the URL", map[string]any{"audit": map[string]any{"sink": "https://audit.example.com/ingest?token=x"}}, "audit/sink"},
		{"unknown audit sink", map[string]any{"audit": map[string]any{"sink": "syslog"}}, "audit/sink"},
		// Signer regexps must be anchored at both ends: an open end matches other repositories'
		// or branches' workflows.
		{"regexp open at the end", map[string]any{"policy": map[string]any{"defaultIdentity": map[string]any{"subjectRegExp": `^https://github\.com/example/`}}}, "/policy/defaultIdentity/subjectRegExp"},
		{"regexp open at the start", map[string]any{"policy": map[string]any{"defaultIdentity": map[string]any{"subjectRegExp": `https://github\.com/example/x$`}}}, "/policy/defaultIdentity/subjectRegExp"},
		{"regexp ending in an escaped dollar", map[string]any{"policy": map[string]any{"defaultIdentity": map[string]any{"subjectRegExp": `^https://x\$`}}}, "/policy/defaultIdentity/subjectRegExp"},
		{"unknown log level", map[string]any{"logLevel": "verbose"}, "logLevel"},
		{"fullnameOverride too long for the gateway Service", map[string]any{"fullnameOverride": strings.Repeat("a", 56)}, "fullnameOverride"},
		{"unknown serviceAccount key", map[string]any{"serviceAccount": map[string]any{"role": "x"}}, "additional properties 'role' not allowed"},
		{"unknown cert-manager key", map[string]any{"gateway": map[string]any{"tls": map[string]any{"certManager": map[string]any{"issuer": "x"}}}}, "additional properties 'issuer' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmRun(t, tc.values, "lint", "--strict", chartDir())
			if err == nil {
				t.Fatalf("values accepted:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("refusal does not name %q:\n%s", tc.want, out)
			}
		})
	}
	// A gateway without TLS and without the explicit unsafe switch is refused at render time.
	out, err := helmRun(t, map[string]any{"gateway": map[string]any{"enabled": true}}, "template", "r", chartDir())
	if err == nil || !strings.Contains(out, "gateway.tls.secretName") || !strings.Contains(out, "gateway.tls.certManager.issuerRef.name") {
		t.Errorf("a gateway without TLS rendered (err %v):\n%s", err, out)
	}
	// An existing ServiceAccount needs its name: the chart binds its RBAC to it.
	out, err = helmRun(t, map[string]any{"serviceAccount": map[string]any{"create": false}}, "template", "r", chartDir())
	if err == nil || !strings.Contains(out, "serviceAccount.name is required") {
		t.Errorf("serviceAccount.create=false without a name rendered (err %v):\n%s", err, out)
	}
}

// restrictedNamespace creates a namespace that enforces restricted Pod Security.
func restrictedNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

// installThirdPartyCRDs installs the CRDs of the optional objects the chart renders: the
// Prometheus Operator's ServiceMonitor and PrometheusRule, cert-manager's Certificate and
// trust-manager's Bundle (copied unchanged, see testdata/crds/README.md).
func installThirdPartyCRDs(t *testing.T) {
	t.Helper()
	dir := filepath.Join(repoRoot, "test", "envtest", "testdata", "crds")
	out, err := kubectlRun(t, nil, "apply", "--server-side", "-f", dir)
	if err != nil {
		t.Fatalf("install third-party CRDs: %v\n%s", err, out)
	}
	if out, err := kubectlRun(t, nil, "wait", "--for=condition=Established", "-f", dir); err != nil {
		t.Fatalf("third-party CRDs not established: %v\n%s", err, out)
	}
}

// TestChartMatrixAppliesServerSide renders every matrix entry and has the apiserver validate every
// object (strict fields) in a restricted namespace: no object is refused and no pod template
// would violate restricted Pod Security.
func TestChartMatrixAppliesServerSide(t *testing.T) {
	installThirdPartyCRDs(t)
	for _, name := range matrixNames() {
		t.Run(name, func(t *testing.T) {
			ns := restrictedNamespace(t, "chart-"+name)
			rendered := render(t, "cm-"+name, ns, chartMatrix[name])
			out, err := dryRunApply(t, rendered)
			if err != nil {
				t.Fatalf("the chart does not apply: %v\n%s", err, out)
			}
			if strings.Contains(out, "would violate PodSecurity") {
				t.Errorf("a pod template violates restricted Pod Security:\n%s", out)
			}
			for _, o := range objects(t, rendered) {
				want := strings.ToLower(o.GetKind()) // kubectl prints kind[.group]/name
				if g := o.GroupVersionKind().Group; g != "" {
					want += "." + g
				}
				if want += "/" + o.GetName() + " created (server dry run)"; !strings.Contains(out, want) {
					t.Errorf("dry run does not list %s %s:\n%s", o.GetKind(), o.GetName(), out)
				}
			}
		})
	}
}

// TestChartPodSecurityViolationIsReported is the twin: the same render with privilege escalation
// allowed draws the apiserver's restricted Pod Security warning, so the check above can fail.
func TestChartPodSecurityViolationIsReported(t *testing.T) {
	ns := restrictedNamespace(t, "chart-psa")
	rendered := render(t, "cm-psa", ns, nil)
	broken := strings.Replace(rendered, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", 1)
	if broken == rendered {
		t.Fatal("no allowPrivilegeEscalation to break")
	}
	out, err := dryRunApply(t, broken)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "would violate PodSecurity") || !strings.Contains(out, "allowPrivilegeEscalation") {
		t.Errorf("no restricted Pod Security warning naming allowPrivilegeEscalation:\n%s", out)
	}
}

// TestChartProductionPieces: the default render has a PDB, NetworkPolicy, topology spread, no RBAC
// wildcard, get-only Secrets, core events for the leader elector, and view/edit aggregation; the
// matrix adds ServiceMonitor, PrometheusRule, priorityClassName and the digest pin.
func TestChartProductionPieces(t *testing.T) {
	kinds := map[string]*unstructured.Unstructured{}
	all := objects(t, render(t, "prod", "prod-ns", chartMatrix["monitoring"]))
	for _, o := range all {
		kinds[o.GetKind()+"/"+o.GetName()] = o
	}
	for _, want := range []string{"PodDisruptionBudget/prod-connector-mcp", "NetworkPolicy/prod-connector-mcp",
		"ServiceMonitor/prod-connector-mcp", "PrometheusRule/prod-connector-mcp",
		"ClusterRole/prod-connector-mcp-view", "ClusterRole/prod-connector-mcp-edit", "Role/prod-connector-mcp-leader-election"} {
		if kinds[want] == nil {
			t.Errorf("render lacks %s", want)
		}
	}
	dep := kinds["Deployment/prod-connector-mcp"]
	if dep == nil {
		t.Fatal("no manager Deployment")
	}
	spec, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	if spec["priorityClassName"] != "system-cluster-critical" || spec["topologySpreadConstraints"] == nil {
		t.Errorf("priorityClassName %v, topologySpreadConstraints %v", spec["priorityClassName"], spec["topologySpreadConstraints"])
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "ghcr.io/b10x/connector-mcp@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("digest pin renders image %v", img)
	}
	rules, _ := yaml.Marshal(kinds["PrometheusRule/prod-connector-mcp"].Object["spec"])
	for _, alert := range []string{"ConnectorMcpDeploymentRefusedForDrift", "ConnectorMcpVerificationFailing", "ConnectorMcpReconcileErrors", `reason="SnapshotDrift"`} {
		if !bytes.Contains(rules, []byte(alert)) {
			t.Errorf("PrometheusRule lacks %s", alert)
		}
	}
	leader, _ := yaml.Marshal(kinds["Role/prod-connector-mcp-leader-election"].Object["rules"])
	if !strings.Contains(string(leader), "- \"\"\n") {
		t.Errorf("the leader-election Role does not allow core events:\n%s", leader)
	}
	for _, o := range objects(t, render(t, "prod", "prod-ns", chartMatrix["gateway"])) {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		rs, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rs {
			rule := r.(map[string]any)
			for _, f := range []string{"verbs", "apiGroups", "resources"} {
				for _, v := range asStrings(rule[f]) {
					if v == "*" {
						t.Errorf("%s %s has a wildcard: %v", o.GetKind(), o.GetName(), rule)
					}
				}
			}
			for _, res := range asStrings(rule["resources"]) {
				// Secrets are read only: get, plus list/watch for the manager's label-filtered
				// informer (connectors.b10x.io/credential=true; docs/security.md). The manager's
				// OAuth producer also creates and updates the McpCredential target and
				// refresh-token Secrets (docs/credentials.md); nothing ever deletes a Secret.
				if res == "secrets" {
					producer := o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-manager")
					for _, v := range asStrings(rule["verbs"]) {
						write := v == "create" || v == "update" || v == "patch"
						if v != "get" && v != "list" && v != "watch" && (!producer || !write) {
							t.Errorf("%s %s: secrets may only be read (and written by the manager's OAuth producer): %v", o.GetKind(), o.GetName(), rule)
						}
					}
				}
			}
		}
	}
}

func asStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	return out
}

// chartFlagExclusions are the manager flags (managerapp.Options.BindFlags) the chart deliberately has no
// value for, with the reason; docs/install.md lists them.
var chartFlagExclusions = map[string]string{
	"allow-loopback-unsafe": "development only: lets freezes and pack pulls reach loopback over plain HTTP",
}

// fullValues sets every manager value, so that every optional flag renders.
var fullValues = map[string]any{"policy": map[string]any{
	"defaultIdentity":      map[string]any{"issuer": "https://issuer.example", "subject": "s", "subjectRegExp": "^s$"},
	"defaultPublicKey":     map[string]any{"configMapName": "key"},
	"defaultProvenance":    map[string]any{"builderID": "b", "sourceRepository": "r", "sourceRef": "refs/heads/main"},
	"trustedRootConfigMap": "tr", "egressAllowCIDRs": []string{"10.0.0.0/8"},
	"serviceCIDRs": []string{"10.96.0.0/12"}, "credentialHashKeySecret": "hash-key",
	"trustedRootTUF":       map[string]any{"url": "https://tuf.example", "rootConfigMap": "tuf-root"},
	"skipProvenanceUnsafe": true, "keylessWithoutTlogUnsafe": true, "keylessRequireSignedTimestamp": true,
	"allowedOAuthIssuers": []string{"https://auth.example.com"},
},
	// The drift webhook sink.
	"driftWebhook": map[string]any{"url": "https://hooks.example.com/drift", "bearerSecret": map[string]any{"name": "hook-token"}},
	"caBundle":     map[string]any{"configMapName": "corp-ca"},
	// Sharding.
	"sharding": map[string]any{"watchLabelSelector": "sharding.connectors.b10x.io/key in (shard1)"},
	// The audit trail's webhook sink.
	"audit": auditWebhookValues,
}

func managerArgs(t *testing.T, values map[string]any) []string {
	t.Helper()
	for _, o := range objects(t, render(t, "flags", "flags-ns", values)) {
		if o.GetKind() == "Deployment" && o.GetName() == "flags-connector-mcp" {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			return asStrings(cs[0].(map[string]any)["args"])
		}
	}
	t.Fatal("no manager Deployment")
	return nil
}

// missingFlags lists the flags registered by BindFlags that args do not set and that are not
// excluded.
func missingFlags(args []string, excluded map[string]string) []string {
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o := managerapp.DefaultOptions()
	o.BindFlags(fs)
	var missing []string
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := excluded[f.Name]; ok || f.Hidden { // hidden: a removed flag kept only to refuse it
			return
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--"+f.Name+"=") || a == "--"+f.Name {
				return
			}
		}
		missing = append(missing, f.Name)
	})
	return missing
}

// TestChartSetsEveryManagerFlag: every flag managerapp.Options.BindFlags registers has a chart value (it
// renders with the full values) or is in chartFlagExclusions, and every rendered flag parses.
func TestChartSetsEveryManagerFlag(t *testing.T) {
	args := managerArgs(t, fullValues)
	if missing := missingFlags(args, chartFlagExclusions); len(missing) > 0 {
		t.Errorf("manager flags with no chart value (add a value, or an exclusion with a reason): %v", missing)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range chartFlagExclusions {
		if !strings.Contains(string(doc), "`--"+name+"`") {
			t.Errorf("docs/install.md does not list the excluded flag --%s", name)
		}
	}
	fs, _ := managerFlagSet()
	if err := fs.Parse(args); err != nil {
		t.Errorf("the rendered manager args do not parse: %v", err)
	}
}

// managerFlagSet is the manager's command line as cmd/manager/main.go builds it: the options'
// flags, main's own, and controller-runtime's zap flags.
func managerFlagSet() (*pflag.FlagSet, *managerapp.Options) {
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o := managerapp.DefaultOptions()
	o.BindFlags(fs)
	for _, n := range []string{"leader-elect", "leader-election-namespace", "metrics-bind-address", "health-probe-bind-address", "graceful-shutdown-timeout"} {
		fs.String(n, "", "cmd/manager/main.go flag")
	}
	bindZapFlags(fs)
	return fs, &o
}

// bindZapFlags adds controller-runtime's zap flags, as both binaries' main does.
func bindZapFlags(fs *pflag.FlagSet) {
	gfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	(&zap.Options{}).BindFlags(gfs)
	fs.AddGoFlagSet(gfs)
}

// TestChartFlagCoverageDetectsGaps is the twin: with the default values (no public key, no
// identity) the same check reports the optional flags as missing, so it can fail.
func TestChartFlagCoverageDetectsGaps(t *testing.T) {
	missing := missingFlags(managerArgs(t, nil), chartFlagExclusions)
	if !strings.Contains(strings.Join(missing, ","), "default-public-key") {
		t.Errorf("default render: missing = %v, want default-public-key among them", missing)
	}
}

// TestImageDefaultsAgree: the chart and config/manager default to the image `make image` builds.
func TestImageDefaultsAgree(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kust, err := os.ReadFile(filepath.Join(repoRoot, "config", "manager", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string][]byte{"values.yaml": values, "config/manager/kustomization.yaml": kust} {
		if !bytes.Contains(content, []byte("ghcr.io/b10x/connector-mcp")) {
			t.Errorf("%s does not default to ghcr.io/b10x/connector-mcp", file)
		}
	}
}

// TestKustomizeDigestPin: an overlay of config/default pins the image by digest the way
// docs/install.md shows (the twin of the tag default checked above).
func TestKustomizeDigestPin(t *testing.T) {
	// Overlays name their bases by relative path: put this one inside the repository.
	dir, err := os.MkdirTemp(filepath.Join(repoRoot, "config"), "overlay-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	digest := "sha256:" + strings.Repeat("cd", 32)
	overlay := "resources:\n- ../default\nimages:\n- name: ghcr.io/b10x/connector-mcp\n  digest: " + digest + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectlRun(t, nil, "kustomize", dir)
	if err != nil {
		t.Fatalf("kustomize overlay: %v\n%s", err, out)
	}
	if !strings.Contains(out, "image: ghcr.io/b10x/connector-mcp@"+digest+"\n") {
		t.Errorf("the overlay does not pin the manager image by digest:\n%s", out)
	}
	if strings.Contains(out, "image: ghcr.io/b10x/connector-mcp:") {
		t.Error("a tag reference remains beside the digest pin")
	}
}

// TestFluxHelmReleaseValuesAreValid: the values of the shipped Flux HelmRelease example pass the
// chart's schema, and the manager flags they render parse and validate (e.g. an anchored subject
// regexp, no removed flag). Twin: a removed value is refused by the schema.
func TestFluxHelmReleaseValuesAreValid(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "flux", "helmrelease.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	for _, doc := range strings.Split(string(raw), "\n---") {
		var hr struct {
			Kind string `json:"kind"`
			Spec struct {
				Values map[string]any `json:"values"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &hr); err != nil {
			t.Fatal(err)
		}
		if hr.Kind == "HelmRelease" {
			values = hr.Spec.Values
		}
	}
	if values == nil {
		t.Fatal("config/flux/helmrelease.yaml has no HelmRelease with spec.values")
	}
	args := managerArgs(t, values)
	fs, o := managerFlagSet()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("the example's manager args do not parse: %v", err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the example's manager flags are refused: %v", err)
	}
	stale := map[string]any{"policy": map[string]any{"requireProvenance": true}}
	if out, err := helmRun(t, stale, "template", "stale", chartDir(), "--namespace", "stale-ns"); err == nil || !strings.Contains(out, "requireProvenance") {
		t.Fatalf("twin: the removed value policy.requireProvenance was not refused by the schema: %v\n%s", err, out)
	}
}
