package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestDirectory(t *testing.T) {
	ctx := context.Background()
	files := newFixture(t, nil, nil)
	// A second server, reviewed as Connection "calc".
	calcSrv := mcptest.StartHTTP(mcptest.NewServer("calc", testTools()), mcptest.Modern)
	t.Cleanup(calcSrv.Close)
	calcDoc := freeze(t, calcSrv.URL)
	calcDoc.Service.Ref, calcDoc.Service.ConnectionRef = "calc", "calc"
	calcDep := deployment(calcDoc, calcSrv.URL)
	calc, err := invocation.NewSurface(calcDoc, calcDep, files.opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := invocation.NewDirectory()
	defer dir.Close()
	dir.Put(files.s)
	dir.Put(calc)
	if got := strings.Join(dir.Connections(), ","); got != "calc,files" {
		t.Fatalf("connections %s", got)
	}
	call := func(conn, lease string) error {
		_, err := dir.Invoke(ctx, invocation.Request{Caller: alice, Lease: lease, Operation: "add", Connection: conn, Arguments: json.RawMessage(`{"a":1,"b":1}`)})
		return err
	}
	dFiles, err := dir.Describe(ctx, alice, "add", "files")
	if err != nil {
		t.Fatal(err)
	}
	dCalc, err := dir.Describe(ctx, alice, "add", "calc")
	if err != nil {
		t.Fatal(err)
	}
	if dFiles.Lease == dCalc.Lease {
		t.Fatal("one lease for two Connections")
	}
	if err := call("files", dFiles.Lease); err != nil {
		t.Fatal(err)
	}
	if err := call("calc", dCalc.Lease); err != nil {
		t.Fatal(err)
	}
	// A lease of one Connection does not open the other.
	if err := call("calc", dFiles.Lease); refusal(err) != "stale_lease" {
		t.Fatalf("files lease on calc: %v", err)
	}
	// An unknown Connection.
	if err := call("nope", dFiles.Lease); !errors.Is(err, invocation.ErrWrongConnection) {
		t.Fatalf("unknown connection: %v", err)
	}
	// A new activation replaces the surface: old leases are stale, new ones work.
	mcptest.SetTool(calcSrv.Server, &mcp.Tool{Name: "add", Description: "Add, v2.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	calcDoc2 := freeze(t, calcSrv.URL)
	calcDoc2.Service.Ref, calcDoc2.Service.ConnectionRef = "calc", "calc"
	calc2, err := invocation.NewSurface(calcDoc2, deployment(calcDoc2, calcSrv.URL), files.opts)
	if err != nil {
		t.Fatal(err)
	}
	dir.Put(calc2)
	if err := call("calc", dCalc.Lease); refusal(err) != "stale_lease" {
		t.Fatalf("old calc lease after the new activation: %v", err)
	}
	dCalc2, err := dir.Describe(ctx, alice, "add", "calc")
	if err != nil {
		t.Fatal(err)
	}
	if err := call("calc", dCalc2.Lease); err != nil {
		t.Fatal(err)
	}
	// Deactivation removes the Connection.
	dir.Remove("calc")
	if err := call("calc", dCalc2.Lease); !errors.Is(err, invocation.ErrWrongConnection) {
		t.Fatalf("after Remove: %v", err)
	}
	if err := call("files", dFiles.Lease); err != nil {
		t.Fatalf("files after removing calc: %v", err)
	}
}
