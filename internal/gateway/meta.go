package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/snapshot"
)

// The meta-tools of the /mcp route.
const (
	// ToolSearchOperations searches the operations the caller may invoke.
	ToolSearchOperations = "search_operations"
	// ToolDescribeOperation returns an operation's facts, its input schema and a lease.
	ToolDescribeOperation = "describe_operation"
	// ToolInvokeOperation invokes an operation under a lease.
	ToolInvokeOperation = "invoke_operation"
)

// MaxSearchResults bounds the operations one search_operations answer lists.
const MaxSearchResults = 100

// metaTools are the tools of the /mcp route.
func metaTools() []*mcp.Tool {
	f, t := false, true
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &f}
	target := `"namespace":{"type":"string"},"deployment":{"type":"string"},"operation":{"type":"string"}`
	return []*mcp.Tool{
		{Name: ToolSearchOperations, Title: "Search operations",
			Description: "Search the reviewed operations you may invoke. Matches the query against operation references, titles and descriptions (case-insensitive); an empty query lists everything, up to 100 results. Set namespace to search only that namespace's deployments (cheaper, and never partial unless the namespace alone exceeds the gateway's review bound). Without it the served deployments of every namespace are checked in order up to the gateway's bound; an answer that stopped there says \"partial\": true.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"namespace":{"type":"string","description":"Only this namespace's deployments."}},"additionalProperties":false}`), Annotations: ro},
		{Name: ToolDescribeOperation, Title: "Describe an operation",
			Description: "Return the reviewed facts of one operation (title, description, effect), its frozen input schema and a lease for invoke_operation.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + target + `},"required":["namespace","deployment","operation"],"additionalProperties":false}`), Annotations: ro},
		{Name: ToolInvokeOperation, Title: "Invoke an operation",
			Description: "Invoke one operation with the lease describe_operation returned and arguments that satisfy its input schema. A stale lease is refused as stale_lease: describe again. An operation that requires approval is refused approval_required with the name of an approval request: once a person approved it, repeat the same call with approval set to that name.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + target + `,"lease":{"type":"string"},"arguments":{"type":"object"},"approval":{"type":"string","description":"The approved approval request this call is the retry of."}},"required":["namespace","deployment","operation","lease"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &t}},
	}
}

// OperationSummary is one search_operations hit.
type OperationSummary struct {
	// Namespace and Deployment name the ServiceDeployment.
	Namespace  string `json:"namespace"`
	Deployment string `json:"deployment"`
	// Operation is the operation reference.
	Operation string `json:"operation"`
	// Title and Description are the reviewed ones.
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Effect is the reviewed effect.
	Effect apiv1.Effect `json:"effect"`
}

// OperationDescription is the describe_operation answer.
type OperationDescription struct {
	// Namespace and Deployment name the ServiceDeployment.
	Namespace  string `json:"namespace"`
	Deployment string `json:"deployment"`
	*invocation.Description
}

type metaTarget struct {
	Namespace  string          `json:"namespace"`
	Deployment string          `json:"deployment"`
	Operation  string          `json:"operation"`
	Lease      string          `json:"lease"`
	Query      string          `json:"query"`
	Arguments  json.RawMessage `json:"arguments"`
	Approval   string          `json:"approval"`
}

// metaMembers are the argument members each meta-tool takes, by exact name.
var metaMembers = map[string][]string{
	ToolSearchOperations:  {"query", "namespace"},
	ToolDescribeOperation: {"namespace", "deployment", "operation"},
	ToolInvokeOperation:   {"namespace", "deployment", "operation", "lease", "arguments", "approval"},
}

// decodeMetaArguments decodes the arguments of meta-tool tool strictly, as every other untrusted
// document: one JSON object (or none), valid UTF-8, unique member names at every depth, and only
// the members the tool takes, by exact name ("Operation" is not "operation", and is refused).
// Any other document is refused invalid_params.
func decodeMetaArguments(tool string, raw json.RawMessage) (metaTarget, error) {
	var in metaTarget
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return in, nil
	}
	ms, err := snapshot.Members(raw)
	if err != nil {
		return in, refusalNamed(RefusalInvalidParams)
	}
	for _, m := range ms {
		if !slices.Contains(metaMembers[tool], m.Name) {
			return in, refusalNamed(RefusalInvalidParams)
		}
	}
	if err := snapshot.Unmarshal(raw, &in); err != nil {
		return in, refusalNamed(RefusalInvalidParams)
	}
	return in, nil
}

// callMeta answers tools/call on /mcp.
func (g *Gateway) callMeta(ctx context.Context, info *reqInfo, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	if _, ok := metaMembers[p.Name]; !ok {
		return nil, refusalNamed(RefusalUnknownTool)
	}
	in, err := decodeMetaArguments(p.Name, p.Arguments)
	if err != nil {
		return nil, err
	}
	if p.Name == ToolSearchOperations {
		return g.search(ctx, info.caller, in.Query, in.Namespace)
	}
	if in.Namespace == "" || in.Deployment == "" || in.Operation == "" {
		return nil, refusalNamed(RefusalInvalidParams)
	}
	s, err := g.surface(ctx, info.caller, in.Namespace, in.Deployment)
	if err != nil {
		return nil, err
	}
	if p.Name == ToolDescribeOperation {
		d, err := s.Describe(ctx, info.caller, in.Operation, s.Connection())
		if err != nil {
			return nil, refusal(err)
		}
		return structured(OperationDescription{Namespace: in.Namespace, Deployment: in.Deployment, Description: d})
	}
	if in.Lease == "" {
		return nil, refusalNamed(RefusalInvalidParams)
	}
	hint, err := approvalHint(p.Meta, in.Approval)
	if err != nil {
		return nil, err
	}
	return g.invoke(ctx, info.caller, s, in.Operation, in.Lease, in.Arguments, false, hint)
}

// SearchResult is the search_operations answer.
type SearchResult struct {
	// Operations are the hits, by namespace, deployment and operation.
	Operations []OperationSummary `json:"operations"`
	// Truncated says the answer stopped at MaxSearchResults hits.
	Truncated bool `json:"truncated,omitempty"`
	// Partial says the search stopped at the gateway's bound of authorization checks per search
	// (--max-search-reviews) before every served deployment in scope was checked: search a
	// namespace to see the rest.
	Partial bool `json:"partial,omitempty"`
}

// searchCtxKey marks the context of a search_operations call: the per-deployment "list" audit
// events of its surfaces are not recorded (the search records one event of its own).
type searchCtxKey struct{}

// search lists the operations that match query of the served deployments in scope (namespace ns,
// or every namespace when ns is empty) the caller may invoke. It checks the authorization of at
// most MaxSearchReviews deployments (the namespace index makes a namespaced search cost only that
// namespace's deployments), says so with Partial when it stops at that bound, and records one
// audit event ("search") whatever the number of deployments.
func (g *Gateway) search(ctx context.Context, caller invocation.Caller, query, ns string) (mcp.Result, error) {
	start := time.Now()
	q := strings.ToLower(query)
	res := SearchResult{Operations: []OperationSummary{}}
	var surfaces []*invocation.Surface
	if ns != "" {
		surfaces = g.cfg.Registry.SurfacesIn(ns)
	} else {
		surfaces = g.cfg.Registry.Surfaces()
	}
	sctx := context.WithValue(ctx, searchCtxKey{}, true)
	reviews := 0
scan:
	for _, s := range surfaces {
		if reviews == g.cfg.MaxSearchReviews {
			res.Partial = true
			break
		}
		reviews++
		ds, err := s.List(sctx, caller, s.Connection())
		if err != nil {
			continue // forbidden (or undecidable): nothing of it is shown
		}
		t := s.Target()
		for _, d := range ds {
			if q != "" && !strings.Contains(strings.ToLower(d.Operation+"\n"+d.Title+"\n"+d.Description), q) {
				continue
			}
			res.Operations = append(res.Operations, OperationSummary{Namespace: t.Namespace, Deployment: t.Name, Operation: d.Operation,
				Title: d.Title, Description: d.Description, Effect: d.Effect})
			if len(res.Operations) == MaxSearchResults {
				res.Truncated = true
				break scan
			}
		}
	}
	if audit := g.cfg.Registry.Surface.Audit; audit != nil {
		audit(ctx, invocation.AuditEvent{Action: "search", Target: invocation.Target{Namespace: ns}, User: caller.User, Seed: caller.Seed,
			Outcome: "ok", Duration: time.Since(start)})
	}
	return structured(res)
}

// structured answers with v as structuredContent and as JSON text.
func structured(v any) (mcp.Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, refusalNamed(RefusalCallFailed)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}
