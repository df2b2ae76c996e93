package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/ocipack"
)

func init() { register(newReviewCmd) }

// kubeFlags locate the cluster: --kubeconfig (default $KUBECONFIG or ~/.kube/config),
// --context and -n/--namespace.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func addKubeFlags(cmd *cobra.Command, withNamespace bool) *kubeFlags {
	k := &kubeFlags{}
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&k.context, "context", "", "kubeconfig context (default: the current context)")
	if withNamespace {
		cmd.Flags().StringVarP(&k.namespace, "namespace", "n", "", "namespace (default: the context's namespace)")
	}
	return k
}

func (k *kubeFlags) clientConfig(env *cliEnv) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if p := env.getenv("KUBECONFIG"); p != "" {
		rules.Precedence = filepath.SplitList(p)
	}
	rules.ExplicitPath = k.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
}

func (k *kubeFlags) client(env *cliEnv) (client.Client, error) {
	rc, err := k.clientConfig(env).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	sch := runtime.NewScheme()
	if err := apiv1.AddToScheme(sch); err != nil {
		return nil, err
	}
	// Secrets: mcpctl login --to-secret writes the refresh-token Secret.
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, err
	}
	return client.New(rc, client.Options{Scheme: sch})
}

func (k *kubeFlags) ns(env *cliEnv) (string, error) {
	if k.namespace != "" {
		return k.namespace, nil
	}
	ns, _, err := k.clientConfig(env).Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, nil
}

// listScope is the scope of a list: every namespace with -A, else the namespace of ns.
func (k *kubeFlags) listScope(env *cliEnv, all bool) ([]client.ListOption, error) {
	if all {
		return nil, nil
	}
	ns, err := k.ns(env)
	if err != nil {
		return nil, err
	}
	return []client.ListOption{client.InNamespace(ns)}, nil
}

// objectKey names the object arg designates: "NAMESPACE/NAME", or "NAME" in the namespace of
// -n/--namespace (default: the kubeconfig context's), as kubectl does. "NS/NAME" with a different
// -n is a usage error.
func (k *kubeFlags) objectKey(env *cliEnv, arg string) (types.NamespacedName, error) {
	if strings.Contains(arg, "/") {
		key, err := parseNSName(arg)
		if err != nil {
			return key, err
		}
		if k.namespace != "" && k.namespace != key.Namespace {
			return types.NamespacedName{}, usagef("%q names namespace %q but -n/--namespace is %q", arg, key.Namespace, k.namespace)
		}
		return key, nil
	}
	if arg == "" {
		return types.NamespacedName{}, usagef("want NAMESPACE/NAME or NAME -n NAMESPACE, got %q", arg)
	}
	ns, err := k.ns(env)
	if err != nil {
		return types.NamespacedName{}, err
	}
	if ns == "" {
		return types.NamespacedName{}, usagef("%q names no namespace: write NAMESPACE/NAME or pass -n NAMESPACE", arg)
	}
	return types.NamespacedName{Namespace: ns, Name: arg}, nil
}

// parseNSName parses "NS/NAME".
func parseNSName(arg string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, usagef("want NAMESPACE/NAME, got %q", arg)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

func newReviewCmd(env *cliEnv) *cobra.Command {
	return groupCmd("review", "Review recorded drift: list, show, repin a profile, refresh (re-verify now)",
		newReviewListCmd(env), newReviewShowCmd(env), newReviewRepinCmd(env), newReviewRefreshCmd(env))
}

func getReview(ctx context.Context, env *cliEnv, k *kubeFlags, arg string) (*apiv1.McpSnapshotReview, error) {
	key, err := k.objectKey(env, arg)
	if err != nil {
		return nil, err
	}
	c, err := k.client(env)
	if err != nil {
		return nil, err
	}
	rv := &apiv1.McpSnapshotReview{}
	if err := c.Get(ctx, key, rv); err != nil {
		return nil, err
	}
	return rv, nil
}

// reviewResource is the resource name "review list -o name" prints, kubectl's kind.group.
const reviewResource = "mcpsnapshotreview.connectors.b10x.io"

// reviewListItem is one line of "review list -o json|yaml".
type reviewListItem struct {
	Namespace  string           `json:"namespace"`
	Name       string           `json:"name"`
	Deployment string           `json:"deployment"`
	Reviewed   string           `json:"reviewed"`
	Candidate  string           `json:"candidate"`
	Recorded   string           `json:"recorded"`
	Classes    map[string]int32 `json:"classes,omitempty"`
}

func newReviewListCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [-n NAMESPACE] [-A] [-o json|yaml|name|wide]",
		Short: "List deployments waiting on review, with class counts",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	all := cmd.Flags().BoolP("all-namespaces", "A", false, "list in every namespace")
	out := addOutputFlag(cmd, "a table", formatJSON, formatYAML, formatName, formatWide)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 0 {
			return usagef("review list: unexpected arguments %q (see %s --help)", args, cmd.CommandPath())
		}
		format, err := out.format()
		if err != nil {
			return err
		}
		c, err := k.client(env)
		if err != nil {
			return err
		}
		opts, err := k.listScope(env, *all)
		if err != nil {
			return err
		}
		var l apiv1.McpSnapshotReviewList
		if err := c.List(cmd.Context(), &l, opts...); err != nil {
			return err
		}
		items := make([]reviewListItem, 0, len(l.Items))
		for _, rv := range l.Items {
			items = append(items, reviewListItem{Namespace: rv.Namespace, Name: rv.Name, Deployment: rv.Spec.DeploymentName,
				Reviewed: rv.Spec.ReviewedSnapshotDigest, Candidate: rv.Spec.CandidateSnapshotDigest,
				Recorded: recordedReason(&rv), Classes: rv.Spec.Classes})
		}
		sort.Slice(items, func(i, j int) bool {
			return items[i].Namespace+"/"+items[i].Name < items[j].Namespace+"/"+items[j].Name
		})
		if ok, err := writeStructured(env.stdout, format, items); ok {
			return err
		}
		switch format {
		case formatName:
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%s/%s\n", reviewResource, it.Name)
			}
		case formatWide:
			fmt.Fprintf(env.stdout, "%-40s %-30s %-20s %-20s %-18s %s\n", "REVIEW", "DEPLOYMENT", "REVIEWED", "CANDIDATE", "RECORDED", "CLASSES")
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%-40s %-30s %-20s %-20s %-18s %s\n", it.Namespace+"/"+it.Name, it.Deployment, shortDigest(it.Reviewed),
					shortDigest(it.Candidate), it.Recorded, formatCounts(it.Classes))
			}
		default:
			fmt.Fprintf(env.stdout, "%-40s %-20s %-18s %s\n", "REVIEW", "CANDIDATE", "RECORDED", "CLASSES")
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%-40s %-20s %-18s %s\n", it.Namespace+"/"+it.Name, shortDigest(it.Candidate), it.Recorded, formatCounts(it.Classes))
			}
		}
		return nil
	})
	return cmd
}

func recordedReason(rv *apiv1.McpSnapshotReview) string {
	if c := meta.FindStatusCondition(rv.Status.Conditions, apiv1.ReviewConditionRecorded); c != nil {
		return c.Reason
	}
	return "Unknown"
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// formatCounts renders class counts in review.Classes order: "new_tool=1 text_only=2".
func formatCounts(m map[string]int32) string {
	var parts []string
	for _, c := range review.Classes {
		if n := m[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	var extra []string
	for c, n := range m {
		if !strings.Contains(" "+strings.Join(review.Classes, " ")+" ", " "+c+" ") && n > 0 {
			extra = append(extra, fmt.Sprintf("%s=%d", c, n))
		}
	}
	sort.Strings(extra)
	return strings.Join(append(parts, extra...), " ")
}

func newReviewShowCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show (NAMESPACE/NAME | NAME -n NAMESPACE) [-o json|yaml]",
		Short: "Show a recorded drift field by field (coloured on a terminal)",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	out := addOutputFlag(cmd, "human", formatJSON, formatYAML)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("review show: want one review, NAMESPACE/NAME or NAME -n NAMESPACE (see %s --help)", cmd.CommandPath())
		}
		format, err := out.format()
		if err != nil {
			return err
		}
		rv, err := getReview(cmd.Context(), env, k, args[0])
		if err != nil {
			return err
		}
		if ok, err := writeStructured(env.stdout, format, rv); ok {
			return err
		}
		_, err = io.WriteString(env.stdout, formatReview(rv, useColour(env)))
		return err
	})
	return cmd
}

// useColour is true when stdout is a terminal and NO_COLOR is unset.
func useColour(env *cliEnv) bool {
	if env.getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := env.stdout.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// safeText escapes what a terminal would hide or obey: control characters, format characters
// (zero-width, bidi controls) and non-printable runes become \u{XXXX}.
func safeText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\t' || (unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r)) {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, `\u{%04X}`, r)
	}
	return b.String()
}

// formatReview renders a review for people. Every server-provided string goes through safeText.
func formatReview(rv *apiv1.McpSnapshotReview, colour bool) string {
	paint := func(code, s string) string {
		if !colour {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	red, green, yellow, bold := func(s string) string { return paint("31", s) }, func(s string) string { return paint("32", s) },
		func(s string) string { return paint("33", s) }, func(s string) string { return paint("1", s) }
	sp := rv.Spec
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s\n", bold("review"), rv.Namespace, rv.Name)
	fmt.Fprintf(&b, "deployment: %s\n", sp.DeploymentName)
	fmt.Fprintf(&b, "reviewed:   %s (protocol %s)\n", sp.ReviewedSnapshotDigest, sp.ReviewedProtocolVersion)
	fmt.Fprintf(&b, "candidate:  %s (protocol %s)\n", sp.CandidateSnapshotDigest, sp.ProtocolVersion)
	fmt.Fprintf(&b, "server:     %s %s\n", safeText(sp.ServerInfo.Name), safeText(sp.ServerInfo.Version))
	fmt.Fprintf(&b, "frozen at:  %s\n", sp.FrozenAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "recorded:   %s\n", recordedReason(rv))
	fmt.Fprintf(&b, "classes:    %s\n", formatCounts(sp.Classes))
	if sp.ReviewedProtocolVersion != sp.ProtocolVersion {
		fmt.Fprintf(&b, "\n%s protocol %s -> %s [%s]\n", yellow("~"), sp.ReviewedProtocolVersion, sp.ProtocolVersion, review.ClassProtocolChange)
	}
	descs := map[string]*runtime.RawExtension{}
	for _, t := range append(append([]apiv1.ReviewTool(nil), sp.Added...), sp.Changed...) {
		descs[t.Name] = t.Descriptor
	}
	for _, d := range sp.Diff {
		b.WriteByte('\n')
		cls := "[" + strings.Join(d.Classes, ", ") + "]"
		switch d.Kind {
		case review.KindAdded:
			fmt.Fprintf(&b, "%s added %q %s %s\n", green("+"), safeText(d.Name), d.To, cls)
			if raw := descs[d.Name]; raw != nil {
				fmt.Fprintf(&b, "    %s %s\n", green("+"), safeText(string(raw.Raw)))
			}
		case review.KindRemoved:
			fmt.Fprintf(&b, "%s removed %q %s %s\n", red("-"), safeText(d.Name), d.From, cls)
		default:
			fmt.Fprintf(&b, "%s changed %q %s -> %s %s\n", yellow("~"), safeText(d.Name), d.From, d.To, cls)
			for _, c := range d.Changes {
				fmt.Fprintf(&b, "    %s [%s]\n", safeText(c.Path), strings.Join(c.Classes, ", "))
				fmt.Fprintf(&b, "      %s %s\n", red("-"), optText(c.Old))
				fmt.Fprintf(&b, "      %s %s\n", green("+"), optText(c.New))
			}
		}
		for _, w := range d.Warnings {
			fmt.Fprintf(&b, "    %s warning: %s\n", red("!"), safeText(w))
		}
		for _, f := range d.Flags {
			fmt.Fprintf(&b, "    %s flag: %s\n", red("!"), f)
		}
	}
	return b.String()
}

func optText(s *string) string {
	if s == nil {
		return "(absent)"
	}
	return safeText(*s)
}

func newReviewRepinCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repin (NAMESPACE/NAME | NAME -n NAMESPACE) --profile REVIEWED.yaml --out-file NEW.(yaml|json)",
		Short: "Write a new profile document for the recorded candidate (changed and new tools marked unreviewed)",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	profilePath := cmd.Flags().String("profile", "", "the reviewed profile document the deployment runs (YAML or JSON)")
	out := cmd.Flags().String("out-file", "", "file to write the new profile document to (.json: JSON, else YAML)")
	markRequired(cmd, "profile", "out-file")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("review repin: want one review, NAMESPACE/NAME or NAME -n NAMESPACE (see %s --help)", cmd.CommandPath())
		}
		doc, err := readProfile(*profilePath)
		if err != nil {
			return err
		}
		if err := ocipack.ValidateDraft(doc); err != nil {
			return err
		}
		rv, err := getReview(cmd.Context(), env, k, args[0])
		if err != nil {
			return err
		}
		cand, err := review.CandidateOf(doc, rv)
		if err != nil {
			return err
		}
		res, err := review.Repin(doc, cand)
		if err != nil {
			return err
		}
		format := ocipack.FormatYAML
		if strings.HasSuffix(*out, ".json") {
			format = ocipack.FormatJSON
		}
		enc, err := ocipack.EncodeProfile(res.Document, format)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, enc, 0o600); err != nil {
			return err
		}
		for _, m := range res.Marks {
			if m.Kind == review.KindChanged {
				fmt.Fprintf(env.stderr, "re-review %q (operation %s, was %s) [%s]\n", safeText(m.Tool), m.OperationRef, m.PreviousEffect, strings.Join(m.Classes, ", "))
			} else {
				fmt.Fprintf(env.stderr, "review new %q (operation %s) [%s]\n", safeText(m.Tool), m.OperationRef, strings.Join(m.Classes, ", "))
			}
		}
		for _, d := range res.Dropped {
			fmt.Fprintf(env.stderr, "dropped operation %s (tool removed)\n", d)
		}
		fmt.Fprintf(env.stderr, "wrote %s: snapshot %s, %d operation(s) to review; set their effects, then profile check, pack push, pack sign\n",
			*out, res.Document.Snapshot.Digest, len(res.Marks))
		return nil
	})
	return cmd
}

func newReviewRefreshCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "refresh (NAMESPACE/NAME | NAME -n NAMESPACE)",
		Short: "Ask the operator to re-verify a ServiceDeployment's live server now",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("review refresh: want one ServiceDeployment, NAMESPACE/NAME or NAME -n NAMESPACE (see %s --help)", cmd.CommandPath())
		}
		key, err := k.objectKey(env, args[0])
		if err != nil {
			return err
		}
		c, err := k.client(env)
		if err != nil {
			return err
		}
		at := time.Now().UTC().Format(time.RFC3339)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{apiv1.ReverifyRequestedAtAnnotation: at}}})
		sd := &apiv1.ServiceDeployment{}
		sd.Namespace, sd.Name = key.Namespace, key.Name
		if err := c.Patch(cmd.Context(), sd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "requested re-verification of %s at %s\n", key, at)
		return nil
	})
	return cmd
}
