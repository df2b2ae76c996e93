package envtest

// Chart values that reach flags, names and selectors: every flag value is quoted, signer regexps
// are anchored and survive the documented install command, the escape hatches (name overrides,
// ServiceAccounts, log level, security contexts, scheduling) keep every selector and binding
// consistent, and the gateway's certificate and its callers' CA bundle come from cert-manager and
// trust-manager.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/b10x/connector-mcp/internal/gatewayapp"
)

// yamlSyntaxValues are flag values that YAML reads as something else when written unquoted: a
// mapping (": "), a comment (" #") or an alias ("*" first).
var yamlSyntaxValues = map[string]any{
	"policy": map[string]any{
		"defaultIdentity": map[string]any{"issuer": "*issuer: https://issuer.example #1", "subject": "subject: #2",
			"subjectRegExp": `^https://github\.com/x: y #3$`},
		"defaultProvenance": map[string]any{"builderID": "*builder", "sourceRepository": "git+https://x: y", "sourceRef": "refs/heads/a #4"},
	},
	"sharding": map[string]any{"watchLabelSelector": "*shard: #5"},
	"gateway": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gateway-tls"},
		"audience": "*aud: #6", "allowedHosts": []string{"mcp.example.com", "*host: #7"}},
}

// yamlSyntaxArgs are the arguments yamlSyntaxValues must render, byte for byte, per Deployment
// ("manager" or "gateway").
var yamlSyntaxArgs = map[string][]string{
	"manager": {
		"--default-identity-issuer=*issuer: https://issuer.example #1", "--default-identity-subject=subject: #2",
		`--default-identity-subject-regexp=^https://github\.com/x: y #3$`, "--default-builder-id=*builder",
		"--default-source-repository=git+https://x: y", "--default-source-ref=refs/heads/a #4",
		"--watch-label-selector=*shard: #5",
	},
	"gateway": {
		"--default-identity-issuer=*issuer: https://issuer.example #1", `--default-identity-subject-regexp=^https://github\.com/x: y #3$`,
		"--audience=*aud: #6", "--allowed-hosts=mcp.example.com", "--allowed-hosts=*host: #7",
	},
}

// deploymentArgs returns the first container's args of the manager and the gateway Deployments
// of a render, as YAML decoded them (not necessarily strings).
func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		role := "manager"
		if strings.HasSuffix(o.GetName(), "-gateway") {
			role = "gateway"
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		args, _ := cs[0].(map[string]any)["args"].([]any)
		out[role] = args
	}
	return out
}

// argProblems lists the wanted args that are not among got exactly, and the args that are not
// strings at all.
func argProblems(got []any, want []string) []string {
	var problems []string
	var strs []string
	for _, a := range got {
		s, ok := a.(string)
		if !ok {
			problems = append(problems, "an argument is not a string: "+strings.TrimSpace(mustYAML(a)))
			continue
		}
		strs = append(strs, s)
	}
	for _, w := range want {
		if !slices.Contains(strs, w) {
			problems = append(problems, "missing "+w)
		}
	}
	return problems
}

func mustYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

// gatewayFlagSet is the gateway's command line as cmd/gateway/main.go builds it.
func gatewayFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
	o := gatewayapp.DefaultOptions()
	o.BindFlags(fs)
	bindZapFlags(fs)
	return fs
}

// TestChartQuotesEveryFlagValue: values with YAML syntax in them render valid Deployments (the
// apiserver validates them in TestChartMatrixAppliesServerSide, entry yaml-syntax-values) whose
// args are the values byte for byte, and the args parse with each binary's flags.
func TestChartQuotesEveryFlagValue(t *testing.T) {
	args := deploymentArgs(t, objects(t, render(t, "q", "q-ns", yamlSyntaxValues)))
	for role, want := range yamlSyntaxArgs {
		if p := argProblems(args[role], want); len(p) > 0 {
			t.Errorf("%s: %v", role, p)
		}
	}
	for role, fs := range map[string]*pflag.FlagSet{"gateway": gatewayFlagSet()} {
		if err := fs.Parse(asStrings(args[role])); err != nil {
			t.Errorf("the rendered %s args do not parse: %v", role, err)
		}
	}
	fs, _ := managerFlagSet()
	if err := fs.Parse(asStrings(args["manager"])); err != nil {
		t.Errorf("the rendered manager args do not parse: %v", err)
	}
}

// TestChartUnquotedArgIsMisread is the twin: the same render with one quoted argument written
// unquoted, as the chart did before, no longer yields that argument.
func TestChartUnquotedArgIsMisread(t *testing.T) {
	rendered := render(t, "q", "q-ns", yamlSyntaxValues)
	quoted := `- "--default-identity-issuer=*issuer: https://issuer.example #1"`
	if !strings.Contains(rendered, quoted) {
		t.Fatalf("render lacks %s", quoted)
	}
	broken := strings.ReplaceAll(rendered, quoted, `- --default-identity-issuer=*issuer: https://issuer.example #1`)
	var misread bool
	for _, doc := range strings.Split(broken, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			misread = true // the Deployment is not even valid YAML any more
			continue
		}
		if got := deploymentArgs(t, []*unstructured.Unstructured{u}); got != nil {
			for _, a := range got {
				if len(argProblems(a, []string{"--default-identity-issuer=*issuer: https://issuer.example #1"})) > 0 {
					misread = true
				}
			}
		}
	}
	if !misread {
		t.Error("the unquoted argument was read unchanged: the check above could not fail")
	}
}

var (
	// installBlock is the fenced `helm install` command under "## Install with Helm".
	installBlock = regexp.MustCompile("(?s)## Install with Helm\n\n```sh\n(helm install .*?)\n```")
	// shellWord is one word of that command: single-quoted strings and other characters up to a space.
	shellWord = regexp.MustCompile(`(?:'[^']*'|[^\s'])+`)
)

// installCommand returns the arguments of docs/install.md's `helm install` command, with the
// line continuations joined and single quotes removed (as a POSIX shell would).
func installCommand(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := installBlock.FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md has no helm install block under \"## Install with Helm\"")
	}
	// The digest is a placeholder the reader replaces.
	cmd := strings.ReplaceAll(string(m[1]), "sha256:<digest you verified>", "sha256:"+strings.Repeat("ab", 32))
	var words []string
	for _, line := range strings.Split(strings.ReplaceAll(cmd, "\\\n", " "), " ") {
		for _, w := range shellWord.FindAllString(line, -1) {
			words = append(words, strings.ReplaceAll(w, "'", ""))
		}
	}
	return words
}

// templateInstallCommand runs docs/install.md's install command as `helm template` against this
// chart and returns the manager's subject regexp argument and the regexp the command names.
func templateInstallCommand(t *testing.T, words []string) (rendered, documented string) {
	t.Helper()
	args := []string{"template", words[2], chartDir()}
	for _, w := range words[4:] {
		if w == "--create-namespace" {
			continue
		}
		if _, v, ok := strings.Cut(w, "policy.defaultIdentity.subjectRegExp="); ok {
			documented = v
		}
		args = append(args, w)
	}
	if documented == "" {
		t.Fatal("the install command sets no policy.defaultIdentity.subjectRegExp")
	}
	out, err := helmRun(t, nil, args...)
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	for _, a := range asStrings(deploymentArgs(t, objects(t, out))["manager"]) {
		if v, ok := strings.CutPrefix(a, "--default-identity-subject-regexp="); ok {
			return v, documented
		}
	}
	t.Fatal("the install command renders no --default-identity-subject-regexp")
	return "", ""
}

// TestInstallCommandKeepsTheRegexp: docs/install.md's helm install command, run as helm template,
// passes the signer regexp to the manager exactly as written (backslashes included).
func TestInstallCommandKeepsTheRegexp(t *testing.T) {
	words := installCommand(t)
	if words[0] != "helm" || words[1] != "install" || len(words) < 5 {
		t.Fatalf("unexpected install command %v", words)
	}
	rendered, documented := templateInstallCommand(t, words)
	if !strings.Contains(documented, `\.`) {
		t.Fatalf("the documented regexp %q escapes no dot: the check would not notice eaten backslashes", documented)
	}
	if rendered != documented {
		t.Errorf("the install command renders the regexp %q, the doc writes %q", rendered, documented)
	}
}

// TestInstallCommandWithSetLosesBackslashes is the twin, and the fact the docs state: the same
// command with --set instead of --set-literal renders the regexp without its backslashes (Helm's
// --set treats a backslash as an escape), so "\." becomes "." and matches any character.
func TestInstallCommandWithSetLosesBackslashes(t *testing.T) {
	words := installCommand(t)
	var changed bool
	for i, w := range words {
		if w == "--set-literal" && strings.HasPrefix(words[i+1], "policy.defaultIdentity.subjectRegExp=") {
			words[i], changed = "--set", true
		}
	}
	if !changed {
		t.Fatal("the install command does not pass the regexp with --set-literal")
	}
	rendered, documented := templateInstallCommand(t, words)
	if want := strings.ReplaceAll(documented, `\`, ""); rendered != want {
		t.Errorf("with --set the regexp renders %q, want %q (backslashes removed)", rendered, want)
	}
}

// overrideValues exercise every escape hatch at once.
var overrideValues = map[string]any{
	"nameOverride":     "mcp",
	"fullnameOverride": "platform-mcp",
	"serviceAccount":   map[string]any{"create": false, "name": "existing-manager"},
	"logLevel":         "debug",
	// The platform assigns the user (e.g. OpenShift): remove the fixed IDs, keep the rest.
	"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil},
	"podLabels":          map[string]any{"team": "platform"},
	"podAnnotations":     map[string]any{"example.com/owner": "platform"},
	"nodeSelector":       map[string]any{"kubernetes.io/os": "linux"},
	"serviceMonitor":     map[string]any{"enabled": true},
	"prometheusRule":     map[string]any{"enabled": true},
	"gateway": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gateway-tls"},
		"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/mcp-gateway"}},
		"logLevel":       "2",
		"podLabels":      map[string]any{"tier": "edge"},
		"nodeSelector":   map[string]any{"pool": "gateway"},
		"tolerations":    []any{map[string]any{"key": "gateway", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"gateway"}}}}}}}},
		"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil},
		"securityContext":    map[string]any{"runAsUser": 10001}},
}

// subset reports whether every pair of sel is in labels (and sel is not empty).
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func stringMap(obj map[string]any, path ...string) map[string]string {
	m, _, _ := unstructured.NestedStringMap(obj, path...)
	return m
}

// consistencyProblems lists the selectors of a render that select none of its pods (Deployment,
// Service, PodDisruptionBudget, NetworkPolicy, topology spread) or Services (ServiceMonitor), the
// ServiceAccount bindings that name no pod's account, and the pods whose account no binding names.
func consistencyProblems(objs []*unstructured.Unstructured) []string {
	var problems []string
	var pods, services []map[string]string
	podAccounts := map[string]bool{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			pl := stringMap(o.Object, "spec", "template", "metadata", "labels")
			pods = append(pods, pl)
			if !subset(stringMap(o.Object, "spec", "selector", "matchLabels"), pl) {
				problems = append(problems, "Deployment "+o.GetName()+": selector does not select its pods")
			}
			tsc, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "topologySpreadConstraints")
			for _, c := range tsc {
				if !subset(stringMap(c.(map[string]any), "labelSelector", "matchLabels"), pl) {
					problems = append(problems, "Deployment "+o.GetName()+": topology spread selects other pods")
				}
			}
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			podAccounts[o.GetNamespace()+"/"+sa] = false
		case "Service":
			services = append(services, o.GetLabels())
		}
	}
	selects := func(sel map[string]string, among []map[string]string) bool {
		return slices.ContainsFunc(among, func(l map[string]string) bool { return subset(sel, l) })
	}
	for _, o := range objs {
		var sel map[string]string
		var among []map[string]string
		switch o.GetKind() {
		case "Service":
			sel, among = stringMap(o.Object, "spec", "selector"), pods
		case "PodDisruptionBudget":
			sel, among = stringMap(o.Object, "spec", "selector", "matchLabels"), pods
		case "NetworkPolicy":
			sel, among = stringMap(o.Object, "spec", "podSelector", "matchLabels"), pods
		case "ServiceMonitor":
			sel, among = stringMap(o.Object, "spec", "selector", "matchLabels"), services
		case "RoleBinding", "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				sm := s.(map[string]any)
				if sm["kind"] != "ServiceAccount" {
					continue
				}
				key := sm["namespace"].(string) + "/" + sm["name"].(string)
				if _, ok := podAccounts[key]; !ok {
					problems = append(problems, o.GetKind()+" "+o.GetName()+": binds "+key+", which no pod runs as")
				}
				podAccounts[key] = true
			}
			continue
		default:
			continue
		}
		if !selects(sel, among) {
			problems = append(problems, o.GetKind()+" "+o.GetName()+": selector selects nothing of the release")
		}
	}
	for sa, bound := range podAccounts {
		if !bound {
			problems = append(problems, "ServiceAccount "+sa+": no binding names it")
		}
	}
	slices.Sort(problems)
	return problems
}

// TestChartEscapeHatches: name overrides, an existing manager ServiceAccount, ServiceAccount
// annotations, log levels, security context overrides and the gateway's own scheduling all
// render, and every object name, selector and binding follows them.
func TestChartEscapeHatches(t *testing.T) {
	objs := objects(t, render(t, "rel", "rel-ns", overrideValues))
	if p := consistencyProblems(objs); len(p) > 0 {
		t.Errorf("inconsistent render: %v", p)
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if !strings.HasPrefix(o.GetName(), "platform-mcp") {
			t.Errorf("%s %s does not use fullnameOverride", o.GetKind(), o.GetName())
		}
		if l := o.GetLabels()["app.kubernetes.io/name"]; l != "mcp" {
			t.Errorf("%s %s: app.kubernetes.io/name %q, want nameOverride", o.GetKind(), o.GetName(), l)
		}
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	if byName["ServiceAccount/platform-mcp"] != nil || byName["ServiceAccount/existing-manager"] != nil {
		t.Error("serviceAccount.create=false still renders the manager's ServiceAccount")
	}
	if gsa := byName["ServiceAccount/platform-mcp-gateway"]; gsa == nil || gsa.GetAnnotations()["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("the gateway's ServiceAccount lacks its IRSA annotation: %v", gsa)
	}
	vap := mustYAML(byName["ValidatingAdmissionPolicy/platform-mcp-manager-secret-writes"].Object["spec"])
	if !strings.Contains(vap, "system:serviceaccount:rel-ns:existing-manager") {
		t.Errorf("the Secret-writes admission policy does not match the existing ServiceAccount:\n%s", vap)
	}
	for name, want := range map[string]struct {
		sa, logLevel string
		labels       []string
		runAsUser    any
	}{
		"platform-mcp":         {"existing-manager", "debug", []string{"team"}, nil},
		"platform-mcp-gateway": {"platform-mcp-gateway", "2", []string{"team", "tier"}, float64(10001)},
	} {
		d := byName["Deployment/"+name]
		if d == nil {
			t.Fatalf("no Deployment %s", name)
		}
		spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
		if spec["serviceAccountName"] != want.sa {
			t.Errorf("%s runs as %v, want %s", name, spec["serviceAccountName"], want.sa)
		}
		if p := argProblems(deploymentArgs(t, []*unstructured.Unstructured{d})[map[bool]string{true: "gateway", false: "manager"}[strings.HasSuffix(name, "-gateway")]],
			[]string{"--zap-log-level=" + want.logLevel}); len(p) > 0 {
			t.Errorf("%s: %v", name, p)
		}
		labels := stringMap(d.Object, "spec", "template", "metadata", "labels")
		for _, l := range want.labels {
			if labels[l] == "" {
				t.Errorf("%s pods lack the label %s: %v", name, l, labels)
			}
		}
		if psc, _ := spec["securityContext"].(map[string]any); psc["runAsUser"] != nil || psc["runAsNonRoot"] != true {
			t.Errorf("%s pod securityContext %v: runAsUser should be removed, runAsNonRoot kept", name, psc)
		}
		c := spec["containers"].([]any)[0].(map[string]any)
		if csc, _ := c["securityContext"].(map[string]any); csc["runAsUser"] != want.runAsUser || csc["allowPrivilegeEscalation"] != false {
			t.Errorf("%s container securityContext %v", name, csc)
		}
	}
	gspec, _, _ := unstructured.NestedMap(byName["Deployment/platform-mcp-gateway"].Object, "spec", "template", "spec")
	if ns, _ := gspec["nodeSelector"].(map[string]any); ns["pool"] != "gateway" || ns["kubernetes.io/os"] != nil {
		t.Errorf("gateway nodeSelector %v, want its own", ns)
	}
	if gspec["tolerations"] == nil || gspec["affinity"] == nil {
		t.Errorf("gateway tolerations %v, affinity %v", gspec["tolerations"], gspec["affinity"])
	}
	mspec, _, _ := unstructured.NestedMap(byName["Deployment/platform-mcp"].Object, "spec", "template", "spec")
	if ns, _ := mspec["nodeSelector"].(map[string]any); ns["kubernetes.io/os"] != "linux" {
		t.Errorf("manager nodeSelector %v", ns)
	}
	// The manager's args name the gateway Service by its overridden name.
	if p := argProblems(deploymentArgs(t, objs)["manager"], []string{"--gateway-service=rel-ns/platform-mcp-gateway"}); len(p) > 0 {
		t.Error(p)
	}
}

// TestChartMatrixIsConsistent: every matrix entry's selectors and bindings hold together.
func TestChartMatrixIsConsistent(t *testing.T) {
	for _, name := range matrixNames() {
		if p := consistencyProblems(objects(t, render(t, "m", "m-ns", chartMatrix[name]))); len(p) > 0 {
			t.Errorf("%s: %v", name, p)
		}
	}
}

// TestChartConsistencyCheckDetectsMismatches is the twin: a Service selecting other pods, a
// binding naming another account and a ServiceMonitor selecting other Services are reported.
func TestChartConsistencyCheckDetectsMismatches(t *testing.T) {
	rendered := render(t, "rel", "rel-ns", overrideValues)
	for _, tc := range []struct{ from, to, want string }{
		{"  selector:\n    app.kubernetes.io/name: mcp\n    app.kubernetes.io/instance: rel\n    control-plane: controller-manager",
			"  selector:\n    app.kubernetes.io/name: connector-mcp\n    app.kubernetes.io/instance: rel\n    control-plane: controller-manager",
			"Service platform-mcp-metrics: selector selects nothing"},
		{`name: "existing-manager"` + "\n  namespace: rel-ns", `name: "platform-mcp"` + "\n  namespace: rel-ns", "which no pod runs as"},
		{"      app.kubernetes.io/component: metrics\n", "      app.kubernetes.io/component: manager-metrics\n", "ServiceMonitor platform-mcp: selector selects nothing"},
	} {
		if !strings.Contains(rendered, tc.from) {
			t.Fatalf("render lacks %q", tc.from)
		}
		p := consistencyProblems(objects(t, strings.Replace(rendered, tc.from, tc.to, 1)))
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("mutation %q: problems %v, want one containing %q", tc.to, p, tc.want)
		}
	}
}

// TestChartGatewayTLSFromCertManager: with an issuer named, the chart renders a cert-manager
// Certificate for exactly the host names the gateway answers, into the Secret the gateway mounts,
// and a trust-manager Bundle writing that Secret's ca.crt into the gateway-access namespaces.
// Twin: with a plain Secret named, neither is rendered and the gateway mounts that Secret.
func TestChartGatewayTLSFromCertManager(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     map[string]any
		wantSecret string
		wantCert   bool
	}{
		{"cert-manager", chartMatrix["gateway-cert-manager"], "gw-connector-mcp-gateway-tls", true},
		{"cert-manager into a named Secret", map[string]any{"gateway": map[string]any{"enabled": true, "tls": map[string]any{
			"secretName": "mcp-tls", "certManager": map[string]any{"issuerRef": map[string]any{"name": "ca"}}, "callerCABundle": map[string]any{"trustManager": true}}}}, "mcp-tls", true},
		{"secret", chartMatrix["gateway"], "gateway-tls", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, render(t, "gw", "gw-ns", tc.values))
			var cert, bundle, dep *unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() + "/" + o.GetName() {
				case "Certificate/gw-connector-mcp-gateway":
					cert = o
				case "Bundle/gw-connector-mcp-gateway-ca":
					bundle = o
				case "Deployment/gw-connector-mcp-gateway":
					dep = o
				}
			}
			vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
			var mounted string
			for _, v := range vols {
				if vm := v.(map[string]any); vm["name"] == "tls" {
					mounted, _, _ = unstructured.NestedString(vm, "secret", "secretName")
				}
			}
			if mounted != tc.wantSecret {
				t.Errorf("the gateway mounts Secret %q, want %q", mounted, tc.wantSecret)
			}
			if !tc.wantCert {
				if cert != nil || bundle != nil {
					t.Errorf("a Secret-only gateway renders a Certificate (%v) or Bundle (%v)", cert != nil, bundle != nil)
				}
				return
			}
			if cert == nil || bundle == nil {
				t.Fatalf("Certificate %v, Bundle %v", cert != nil, bundle != nil)
			}
			if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != mounted {
				t.Errorf("the Certificate writes Secret %q, the gateway mounts %q", s, mounted)
			}
			dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			var hosts []string
			for _, a := range asStrings(deploymentArgs(t, objs)["gateway"]) {
				if h, ok := strings.CutPrefix(a, "--allowed-hosts="); ok {
					hosts = append(hosts, h)
				}
			}
			if !slices.Equal(dns, hosts) || !slices.Contains(dns, "gw-connector-mcp-gateway.gw-ns.svc") {
				t.Errorf("Certificate dnsNames %v, gateway --allowed-hosts %v", dns, hosts)
			}
			spec := mustYAML(bundle.Object["spec"])
			for _, want := range []string{"name: " + mounted, "key: ca.crt", "connectors.b10x.io/gateway-access: \"true\""} {
				if !strings.Contains(spec, want) {
					t.Errorf("Bundle spec lacks %q:\n%s", want, spec)
				}
			}
		})
	}
}

// TestExampleAgentTrustsTheGatewayCA: config/gateway/example-agent.yaml mounts the ConfigMap the
// chart's Bundle writes for the default release (connector-mcp in connector-mcp-system), key
// ca.crt, and points the client at the mounted file; and it calls the Service that release
// creates.
func TestExampleAgentTrustsTheGatewayCA(t *testing.T) {
	var bundle string
	for _, o := range objects(t, render(t, "connector-mcp", "connector-mcp-system", chartMatrix["gateway-cert-manager"])) {
		if o.GetKind() == "Bundle" {
			bundle = o.GetName()
		}
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "gateway", "example-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod *unstructured.Unstructured
	for _, o := range objects(t, string(raw)) {
		if o.GetKind() == "Pod" {
			pod = o
		}
	}
	if pod == nil {
		t.Fatal("example-agent.yaml has no Pod")
	}
	spec, _, _ := unstructured.NestedMap(pod.Object, "spec")
	var volume, mountPath string
	for _, v := range spec["volumes"].([]any) {
		vm := v.(map[string]any)
		if name, _, _ := unstructured.NestedString(vm, "configMap", "name"); name == bundle {
			volume = vm["name"].(string)
		}
	}
	if volume == "" {
		t.Fatalf("the example agent mounts no ConfigMap %q", bundle)
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	for _, m := range c["volumeMounts"].([]any) {
		if mm := m.(map[string]any); mm["name"] == volume {
			mountPath = mm["mountPath"].(string)
		}
	}
	env := map[string]string{}
	for _, e := range c["env"].([]any) {
		em := e.(map[string]any)
		env[em["name"].(string)], _ = em["value"].(string)
	}
	if env["MCP_CA_FILE"] != mountPath+"/ca.crt" {
		t.Errorf("MCP_CA_FILE %q, want %s/ca.crt", env["MCP_CA_FILE"], mountPath)
	}
	if !strings.HasPrefix(env["MCP_URL"], "https://"+strings.TrimSuffix(bundle, "-ca")+".connector-mcp-system.svc:8443/") {
		t.Errorf("MCP_URL %q does not call the release's gateway Service", env["MCP_URL"])
	}
}

// policy.trustedRootTUF.url of public-good Sigstore needs no rootConfigMap: the manager anchors it
// in the root sigstore-go builds in, and no root volume is mounted. Twin: any other repository
// without its root is refused by name.
func TestChartPublicGoodTUFNeedsNoRoot(t *testing.T) {
	args := managerArgs(t, map[string]any{"policy": map[string]any{"trustedRootTUF": map[string]any{"url": "https://tuf-repo-cdn.sigstore.dev"}}})
	var url, root bool
	for _, a := range args {
		url = url || a == "--trusted-root-tuf-url=https://tuf-repo-cdn.sigstore.dev"
		root = root || strings.HasPrefix(a, "--trusted-root-tuf-root")
	}
	if !url || root {
		t.Fatalf("public-good TUF renders args %v", args)
	}
	out, err := helmRun(t, map[string]any{"policy": map[string]any{"trustedRootTUF": map[string]any{"url": "https://tuf.example"}}}, "template", "x", chartDir())
	if err == nil || !strings.Contains(out, "policy.trustedRootTUF.rootConfigMap is required") {
		t.Fatalf("another repository without its root: %v\n%s", err, out)
	}
}

// The chart's defaults name no trusted root: the manager then verifies keyless signatures
// against public-good Sigstore's over TUF (appoptions.KeylessTrust), fetched lazily.
// policy.trustedRootTUF.url=none renders --trusted-root-tuf-url=none (keyless off) and parses.
// Twins: none with a root, and a URL with credentials, a query or plain http off loopback are
// refused by name before anything is installed.
func TestChartKeylessTrustedRootValues(t *testing.T) {
	for _, a := range managerArgs(t, nil) {
		if strings.HasPrefix(a, "--trusted-root") {
			t.Fatalf("the default values render %s", a)
		}
	}
	args := managerArgs(t, map[string]any{"policy": map[string]any{"trustedRootTUF": map[string]any{"url": "none"}}})
	if !slices.Contains(args, "--trusted-root-tuf-url=none") {
		t.Fatalf("url=none renders %v", args)
	}
	fs, o := managerFlagSet()
	if err := fs.Parse(args); err != nil || o.Validate() != nil || o.KeylessTrust().Kind != "none" {
		t.Fatalf("url=none: parse %v, keyless trust %+v", err, o.KeylessTrust())
	}
	for name, c := range map[string]struct {
		policy map[string]any
		want   string
	}{
		"none with a root":        {map[string]any{"trustedRootTUF": map[string]any{"url": "none", "rootConfigMap": "r"}}, "cannot go with policy.trustedRootTUF.url=none"},
		"credentials in the URL":  {map[string]any{"trustedRootTUF": map[string]any{"url": "https://u:p@tuf.example", "rootConfigMap": "r"}}, "trustedRootTUF/url"}, //nolint:gosec // G101: a made-up credential the schema must refuse
		"a query in the URL":      {map[string]any{"trustedRootTUF": map[string]any{"url": "https://tuf.example/?token=x", "rootConfigMap": "r"}}, "trustedRootTUF/url"},
		"plain http off loopback": {map[string]any{"trustedRootTUF": map[string]any{"url": "http://tuf.example", "rootConfigMap": "r"}}, "trustedRootTUF/url"},
	} {
		out, err := helmRun(t, map[string]any{"policy": c.policy}, "template", "x", chartDir())
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}
