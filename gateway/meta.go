package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/invocation"
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
			Description: "Search the reviewed operations you may invoke, across the namespaces you can see. Matches the query against operation references, titles and descriptions (case-insensitive); an empty query lists everything, up to 100 results.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"additionalProperties":false}`), Annotations: ro},
		{Name: ToolDescribeOperation, Title: "Describe an operation",
			Description: "Return the reviewed facts of one operation (title, description, effect), its frozen input schema and a lease for invoke_operation.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + target + `},"required":["namespace","deployment","operation"],"additionalProperties":false}`), Annotations: ro},
		{Name: ToolInvokeOperation, Title: "Invoke an operation",
			Description: "Invoke one operation with the lease describe_operation returned and arguments that satisfy its input schema. A stale lease is refused as stale_lease: describe again.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + target + `,"lease":{"type":"string"},"arguments":{"type":"object"}},"required":["namespace","deployment","operation","lease"],"additionalProperties":false}`),
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
}

// callMeta answers tools/call on /mcp.
func (g *Gateway) callMeta(ctx context.Context, info *reqInfo, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	var in metaTarget
	if len(bytes.TrimSpace(p.Arguments)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Arguments))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return nil, refusalNamed(RefusalInvalidParams)
		}
	}
	switch p.Name {
	case ToolSearchOperations:
		if in.Namespace != "" || in.Deployment != "" || in.Operation != "" || in.Lease != "" || in.Arguments != nil {
			return nil, refusalNamed(RefusalInvalidParams)
		}
		return g.search(ctx, info.caller, in.Query)
	case ToolDescribeOperation, ToolInvokeOperation:
		if in.Namespace == "" || in.Deployment == "" || in.Operation == "" || in.Query != "" {
			return nil, refusalNamed(RefusalInvalidParams)
		}
		s, err := g.surface(ctx, info.caller, in.Namespace, in.Deployment)
		if err != nil {
			return nil, err
		}
		if p.Name == ToolDescribeOperation {
			if in.Lease != "" || in.Arguments != nil {
				return nil, refusalNamed(RefusalInvalidParams)
			}
			d, err := s.Describe(ctx, info.caller, in.Operation, s.Connection())
			if err != nil {
				return nil, refusal(err)
			}
			return structured(OperationDescription{Namespace: in.Namespace, Deployment: in.Deployment, Description: d})
		}
		if in.Lease == "" {
			return nil, refusalNamed(RefusalInvalidParams)
		}
		return g.invoke(ctx, info.caller, s, in.Operation, in.Lease, in.Arguments, false)
	}
	return nil, refusalNamed(RefusalUnknownTool)
}

// search lists the operations of every served deployment the caller may invoke that match query.
func (g *Gateway) search(ctx context.Context, caller invocation.Caller, query string) (mcp.Result, error) {
	q := strings.ToLower(query)
	out := []OperationSummary{}
	for _, s := range g.cfg.Registry.Surfaces() {
		ds, err := s.List(ctx, caller, s.Connection())
		if err != nil {
			continue // forbidden (or undecidable): nothing of it is shown
		}
		t := s.Target()
		for _, d := range ds {
			if q != "" && !strings.Contains(strings.ToLower(d.Operation+"\n"+d.Title+"\n"+d.Description), q) {
				continue
			}
			out = append(out, OperationSummary{Namespace: t.Namespace, Deployment: t.Name, Operation: d.Operation,
				Title: d.Title, Description: d.Description, Effect: d.Effect})
			if len(out) == MaxSearchResults {
				return structured(map[string]any{"operations": out, "truncated": true})
			}
		}
	}
	return structured(map[string]any{"operations": out})
}

// structured answers with v as structuredContent and as JSON text.
func structured(v any) (mcp.Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, refusalNamed(RefusalCallFailed)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}
