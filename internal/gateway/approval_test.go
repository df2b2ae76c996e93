package gateway

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/approval"
)

// TestApprovalHint: the approval members of _meta and invoke_operation's approval argument are
// read strictly; anything else is invalid_params.
func TestApprovalHint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		meta    mcp.Meta
		arg     string
		want    string
		ttl     time.Duration
		refused bool
	}{
		{name: "none"},
		{name: "meta", meta: mcp.Meta{apiv1.ApprovalMetaKey: "apr-abc"}, want: "apr-abc"},
		{name: "argument", arg: "apr-abc", want: "apr-abc"},
		{name: "both agree", meta: mcp.Meta{apiv1.ApprovalMetaKey: "apr-abc"}, arg: "apr-abc", want: "apr-abc"},
		{name: "both disagree", meta: mcp.Meta{apiv1.ApprovalMetaKey: "apr-abc"}, arg: "apr-xyz", refused: true},
		{name: "not a string", meta: mcp.Meta{apiv1.ApprovalMetaKey: 7.0}, refused: true},
		{name: "not a name", meta: mcp.Meta{apiv1.ApprovalMetaKey: "../secrets"}, refused: true},
		{name: "upper case", arg: "Apr-abc", refused: true},
		{name: "ttl", meta: mcp.Meta{ApprovalTTLMetaKey: 60.0}, ttl: time.Minute},
		{name: "ttl fraction", meta: mcp.Meta{ApprovalTTLMetaKey: 1.5}, refused: true},
		{name: "ttl zero", meta: mcp.Meta{ApprovalTTLMetaKey: 0.0}, refused: true},
		{name: "ttl string", meta: mcp.Meta{ApprovalTTLMetaKey: "60"}, refused: true},
	} {
		h, err := approvalHint(tc.meta, tc.arg)
		if tc.refused {
			if outcome(err) != RefusalInvalidParams {
				t.Errorf("%s: %v, want invalid_params", tc.name, err)
			}
			continue
		}
		if err != nil || h.Request != tc.want || h.TTL != tc.ttl {
			t.Errorf("%s: %+v, %v", tc.name, h, err)
		}
	}
}

// TestApprovalRefusalData: approval_required carries the request's name, namespace and the retry
// hint; other approval refusals the name only; neither carries anything else.
func TestApprovalRefusalData(t *testing.T) {
	err := refusal(&approval.Refusal{Name: approval.RefusalApprovalRequired, Request: "apr-1", Namespace: "team-a"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Message != "refused: approval_required" || we.Code != CodeRefused {
		t.Fatalf("error %v", err)
	}
	var d map[string]string
	if json.Unmarshal(we.Data, &d) != nil || d["approval"] != "apr-1" || d["namespace"] != "team-a" || d["hint"] != approval.RetryHint || len(d) != 4 {
		t.Fatalf("data %s", we.Data)
	}
	err = refusal(&approval.Refusal{Name: approval.RefusalApprovalUsed, Request: "apr-1", Namespace: "team-a"})
	if !errors.As(err, &we) || string(we.Data) != `{"refusal":"approval_used","approval":"apr-1","namespace":"team-a"}` {
		t.Fatalf("approval_used data %s", we.Data)
	}
}

// TestDirectCallKeepsApprovalMeta: the direct tools/call path keeps the approval members of
// _meta (and only them), so a retry is judged alike on both paths.
func TestDirectCallKeepsApprovalMeta(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop","arguments":{},"_meta":{"` + apiv1.ApprovalMetaKey +
		`":"apr-1","other":{"x":1}}}}`
	c, ok := parseDirectCall([]byte(body), protocolLegacy)
	if !ok || c.params.Meta[apiv1.ApprovalMetaKey] != "apr-1" || len(c.params.Meta) != 1 {
		t.Fatalf("direct call %+v, %v", c, ok)
	}
	if c, ok := parseDirectCall([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop","arguments":{}}}`), protocolLegacy); !ok || c.params.Meta != nil {
		t.Fatalf("without _meta: %+v, %v", c, ok)
	}
}
