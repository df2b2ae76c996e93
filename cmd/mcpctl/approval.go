package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/approval"
)

func init() {
	register(newApproveCmd)
	register(newDenyCmd)
	register(newApprovalCmd)
}

// Refusal names of the approval verbs.
const (
	// RefusalApprovalNotPending: the request is already decided, used or expired.
	RefusalApprovalNotPending = "approval_not_pending"
	// RefusalApprovalForbidden: the apiserver refused the decision (no approve on the request,
	// the request's own caller, or RBAC); the admission policy's own name is used when it gives
	// one.
	RefusalApprovalForbidden = "approval_forbidden"
)

// DecisionError is a refused approve or deny: Name, and the apiserver's status message when it
// came from there (the policy's own message: never a token or an argument).
type DecisionError struct {
	// Name is the refusal name.
	Name string
	// Err is the cause.
	Err error
}

func (e *DecisionError) Error() string { return e.Err.Error() }

// Refusal returns Name.
func (e *DecisionError) Refusal() string { return e.Name }

// Unwrap returns Err.
func (e *DecisionError) Unwrap() error { return e.Err }

// policyName finds the admission policy's refusal name in its message: "... (approval_self)".
var policyName = regexp.MustCompile(`\((approval_[a-z_]+)\)`)

// decisionError names the failure of a decision.
func decisionError(err error) error {
	switch {
	case errors.Is(err, approval.ErrNotPending):
		return &DecisionError{Name: RefusalApprovalNotPending, Err: err}
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		name := RefusalApprovalForbidden
		if m := policyName.FindStringSubmatch(err.Error()); m != nil {
			name = m[1]
		}
		return &DecisionError{Name: name, Err: err}
	}
	return err
}

func newApproveCmd(env *cliEnv) *cobra.Command { return newDecideCmd(env, true) }

func newDenyCmd(env *cliEnv) *cobra.Command { return newDecideCmd(env, false) }

// newDecideCmd is approve (approve) or deny.
func newDecideCmd(env *cliEnv, approve bool) *cobra.Command {
	verb, short := "approve", "Approve a pending approval request: its call may then run once"
	if !approve {
		verb, short = "deny", "Deny a pending approval request (--reason required): its call never runs"
	}
	cmd := &cobra.Command{
		Use:   verb + " (NAMESPACE/NAME | NAME -n NAMESPACE) [--reason TEXT] [-o json|yaml|name]",
		Short: short,
		Long: short + `.

The decision is written to the request's status with your own identity (asked from the apiserver
with a SelfSubjectReview); the apiserver's admission policy accepts it only from a user allowed the
verb approve on the request, never from the request's caller (docs/approval.md).`,
		Args: cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	reason := cmd.Flags().String("reason", "", "why (required for deny; shown to approvers, never to the caller)")
	out := addOutputFlag(cmd, "one line", formatJSON, formatYAML, formatName)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("%s: want one request, NAMESPACE/NAME or NAME -n NAMESPACE (see %s --help)", verb, cmd.CommandPath())
		}
		if !approve && strings.TrimSpace(*reason) == "" {
			return usagef("deny: --reason is required")
		}
		if len(*reason) > 1024 {
			return usagef("%s: --reason is longer than 1024 bytes", verb)
		}
		format, err := out.format()
		if err != nil {
			return err
		}
		key, err := k.objectKey(env, args[0])
		if err != nil {
			return err
		}
		c, err := approvalClient(env, k)
		if err != nil {
			return err
		}
		who, err := approval.WhoAmI(cmd.Context(), c)
		if err != nil {
			return fmt.Errorf("who am I (SelfSubjectReview): %w", err)
		}
		rq, err := approval.Decide(cmd.Context(), c, key, approve, *reason, who, time.Now())
		if err != nil {
			return decisionError(err)
		}
		if ok, err := writeStructured(env.stdout, format, rq); ok {
			return err
		}
		if format == formatName {
			_, err := fmt.Fprintf(env.stdout, "%s/%s\n", approvalResource, rq.Name)
			return err
		}
		_, err = fmt.Fprintf(env.stdout, "%s/%s %s by %s\n", rq.Namespace, rq.Name, strings.ToLower(string(rq.Status.State)), who.Username)
		return err
	})
	return cmd
}

// approvalClient is the kube client with the authentication API (SelfSubjectReview) known.
func approvalClient(env *cliEnv, k *kubeFlags) (client.Client, error) {
	c, err := k.client(env)
	if err != nil {
		return nil, err
	}
	if err := authenticationv1.AddToScheme(c.Scheme()); err != nil {
		return nil, err
	}
	return c, nil
}

// approvalResource is the resource name "-o name" prints, kubectl's kind.group.
const approvalResource = "mcpapprovalrequest.connectors.b10x.io"

func newApprovalCmd(env *cliEnv) *cobra.Command {
	return groupCmd("approval", "Approval requests of operations that require approval: list, show (approve and deny are verbs of their own)",
		newApprovalListCmd(env), newApprovalShowCmd(env))
}

// approvalListItem is one line of "approval list -o json|yaml".
type approvalListItem struct {
	Namespace  string              `json:"namespace"`
	Name       string              `json:"name"`
	Deployment string              `json:"deployment"`
	Operation  string              `json:"operation"`
	Caller     string              `json:"caller"`
	State      apiv1.ApprovalState `json:"state"`
	Approver   string              `json:"approver,omitempty"`
	ExpiresAt  time.Time           `json:"expiresAt"`
	Created    time.Time           `json:"created"`
}

func newApprovalListCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [-n NAMESPACE] [-A] [--pending] [-o json|yaml|name|wide]",
		Short: "List approval requests: operation, caller, state (past expiry reads Expired), age",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	all := cmd.Flags().BoolP("all-namespaces", "A", false, "list in every namespace")
	pending := cmd.Flags().Bool("pending", false, "only the requests waiting for a decision")
	out := addOutputFlag(cmd, "a table", formatJSON, formatYAML, formatName, formatWide)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 0 {
			return usagef("approval list: unexpected arguments %q (see %s --help)", args, cmd.CommandPath())
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
		var l apiv1.McpApprovalRequestList
		if err := c.List(cmd.Context(), &l, opts...); err != nil {
			return err
		}
		now := metav1.Now()
		items := make([]approvalListItem, 0, len(l.Items))
		for i := range l.Items {
			rq := &l.Items[i]
			st := rq.EffectiveState(now)
			if *pending && st != apiv1.ApprovalPending {
				continue
			}
			it := approvalListItem{Namespace: rq.Namespace, Name: rq.Name, Deployment: rq.Spec.DeploymentName, Operation: rq.Spec.Operation,
				Caller: rq.Spec.Caller.Username, State: st, ExpiresAt: rq.Spec.ExpiresAt.UTC(), Created: rq.CreationTimestamp.UTC()}
			if d := rq.Status.Decision; d != nil {
				it.Approver = d.Approver
			}
			items = append(items, it)
		}
		sort.Slice(items, func(i, j int) bool {
			return items[i].Namespace+"/"+items[i].Name < items[j].Namespace+"/"+items[j].Name
		})
		if ok, err := writeStructured(env.stdout, format, items); ok {
			return err
		}
		age := func(t time.Time) string { return time.Since(t).Truncate(time.Second).String() }
		switch format {
		case formatName:
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%s/%s\n", approvalResource, it.Name)
			}
		case formatWide:
			fmt.Fprintf(env.stdout, "%-40s %-24s %-24s %-50s %-9s %-40s %-20s %s\n", "REQUEST", "DEPLOYMENT", "OPERATION", "CALLER", "STATE", "APPROVER", "EXPIRES", "AGE")
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%-40s %-24s %-24s %-50s %-9s %-40s %-20s %s\n", it.Namespace+"/"+it.Name, it.Deployment, it.Operation,
					safeText(it.Caller), it.State, safeText(it.Approver), it.ExpiresAt.Format(time.RFC3339), age(it.Created))
			}
		default:
			fmt.Fprintf(env.stdout, "%-40s %-24s %-50s %-9s %s\n", "REQUEST", "OPERATION", "CALLER", "STATE", "AGE")
			for _, it := range items {
				fmt.Fprintf(env.stdout, "%-40s %-24s %-50s %-9s %s\n", it.Namespace+"/"+it.Name, it.Operation, safeText(it.Caller), it.State, age(it.Created))
			}
		}
		return nil
	})
	return cmd
}

func newApprovalShowCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show (NAMESPACE/NAME | NAME -n NAMESPACE) [-o json|yaml]",
		Short: "Show one approval request: the exact call, its argument preview, the decision",
		Args:  cobra.ArbitraryArgs,
	}
	k := addKubeFlags(cmd, true)
	out := addOutputFlag(cmd, "human", formatJSON, formatYAML)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("approval show: want one request, NAMESPACE/NAME or NAME -n NAMESPACE (see %s --help)", cmd.CommandPath())
		}
		format, err := out.format()
		if err != nil {
			return err
		}
		key, err := k.objectKey(env, args[0])
		if err != nil {
			return err
		}
		c, err := k.client(env)
		if err != nil {
			return err
		}
		rq := &apiv1.McpApprovalRequest{}
		if err := c.Get(cmd.Context(), key, rq); err != nil {
			return err
		}
		if ok, err := writeStructured(env.stdout, format, rq); ok {
			return err
		}
		_, err = fmt.Fprint(env.stdout, formatApproval(rq, metav1.Now()))
		return err
	})
	return cmd
}

// formatApproval renders a request for an approver. Every string a caller influenced (argument
// names and values, user names, reasons) goes through safeText.
func formatApproval(rq *apiv1.McpApprovalRequest, now metav1.Time) string {
	sp := rq.Spec
	var b strings.Builder
	fmt.Fprintf(&b, "approval request %s/%s\n", rq.Namespace, rq.Name)
	fmt.Fprintf(&b, "state:      %s\n", rq.EffectiveState(now))
	fmt.Fprintf(&b, "deployment: %s\n", sp.DeploymentName)
	fmt.Fprintf(&b, "operation:  %s (%s)\n", sp.Operation, sp.Effect)
	fmt.Fprintf(&b, "caller:     %s\n", safeText(sp.Caller.Username))
	fmt.Fprintf(&b, "snapshot:   %s\n", sp.SnapshotDigest)
	fmt.Fprintf(&b, "profile:    %s\n", sp.ProfileDigest)
	fmt.Fprintf(&b, "arguments:  %s\n", sp.ArgumentsDigest)
	fmt.Fprintf(&b, "created:    %s\n", rq.CreationTimestamp.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "expires:    %s\n", sp.ExpiresAt.UTC().Format(time.RFC3339))
	if len(sp.Preview) > 0 {
		b.WriteString("\npreview:\n")
		for _, p := range sp.Preview {
			switch {
			case p.Sensitive:
				fmt.Fprintf(&b, "  %s: (sensitive) %s\n", safeText(p.Name), p.Digest)
			case p.Truncated:
				fmt.Fprintf(&b, "  %s: %s… (cut; whole value %s)\n", safeText(p.Name), safeText(p.Value), p.Digest)
			default:
				fmt.Fprintf(&b, "  %s: %s\n", safeText(p.Name), safeText(p.Value))
			}
		}
		if sp.PreviewTruncated {
			b.WriteString("  … more arguments than the preview shows\n")
		}
	}
	if d := rq.Status.Decision; d != nil {
		fmt.Fprintf(&b, "\ndecided by: %s at %s\n", safeText(d.Approver), d.Time.UTC().Format(time.RFC3339))
		if d.Reason != "" {
			fmt.Fprintf(&b, "reason:     %s\n", safeText(d.Reason))
		}
	}
	if u := rq.Status.UsedTime; u != nil {
		fmt.Fprintf(&b, "used at:    %s\n", u.UTC().Format(time.RFC3339))
	}
	return b.String()
}
