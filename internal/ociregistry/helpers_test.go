package ociregistry

import (
	"encoding/json"
	"errors"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// testSnapshot builds a snapshot of two tools the way discovery would.
func testSnapshot(t testing.TB) *snapshot.ToolSnapshot {
	t.Helper()
	s, err := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "Acme Issues", Version: "1.2.3"}, []json.RawMessage{
		json.RawMessage(`{"name":"list_issues","description":"List issues","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`),
		json.RawMessage(`{"name":"delete_issue","inputSchema":{"type":"object","properties":{"id":{"type":"string"}}},"_meta":{"x":1}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reviewedProfile is a draft of testSnapshot with every effect reviewed.
func reviewedProfile(t testing.TB) *apiv1.ProfileDocument {
	t.Helper()
	doc := ocipack.Draft(testSnapshot(t))
	for i := range doc.Operations {
		doc.Operations[i].Effect = apiv1.EffectRead
	}
	return doc
}

func refusalName(err error) string {
	var r interface{ Refusal() string }
	if errors.As(err, &r) {
		return r.Refusal()
	}
	return ""
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
