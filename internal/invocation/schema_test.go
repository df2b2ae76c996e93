package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestSchemaCompiledOncePerSnapshot(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	cache := f.opts.Schemas
	invoke := func(s *invocation.Surface, op, args string) {
		t.Helper()
		d, err := s.Describe(ctx, alice, op, "files")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: op, Connection: "files", Arguments: json.RawMessage(args)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			invoke(f.s, "transfer", `{"amount":1,"to":"bob"}`)
		}()
	}
	wg.Wait()
	if n := cache.Compilations(); n != 1 {
		t.Fatalf("%d compilations after 8 concurrent describes and invokes of one operation", n)
	}
	// A surface rebuilt for the same snapshot compiles nothing.
	s2, err := invocation.NewSurface(f.doc, f.dep, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	invoke(s2, "transfer", `{"amount":2,"to":"bob"}`)
	if n := cache.Compilations(); n != 1 {
		t.Fatalf("%d compilations after a rebuilt surface", n)
	}
	// Another operation is its own schema.
	invoke(s2, "add", `{"a":1,"b":2}`)
	if n := cache.Compilations(); n != 2 {
		t.Fatalf("%d compilations after a second operation", n)
	}
	// Twin: a new snapshot compiles its schemas again, even for an unchanged descriptor.
	mcptest.SetTool(f.srv.Server, &mcp.Tool{Name: "echo", Description: "Echo, changed.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	doc2 := freeze(t, f.srv.URL)
	s3, err := invocation.NewSurface(doc2, deployment(doc2, f.srv.URL), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	invoke(s3, "transfer", `{"amount":3,"to":"bob"}`)
	if n := cache.Compilations(); n != 3 {
		t.Fatalf("%d compilations after a new snapshot, want 3", n)
	}
	// Forget drops a snapshot's schemas: the next use compiles again.
	cache.Forget(f.doc.Snapshot.Digest)
	invoke(s2, "transfer", `{"amount":4,"to":"bob"}`)
	if n := cache.Compilations(); n != 4 {
		t.Fatalf("%d compilations after Forget, want 4", n)
	}
}

// Input schemas are self-contained: no $ref or $schema is ever loaded from the network or a file.
func TestSchemaLoadsNothing(t *testing.T) {
	var hits atomic.Int64
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer ext.Close()
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	tools := []*mcp.Tool{
		{Name: "remote-ref", InputSchema: schema(`{"type":"object","properties":{"x":{"$ref":"` + ext.URL + `/s.json"}}}`)},
		{Name: "relative-ref", InputSchema: schema(`{"type":"object","properties":{"x":{"$ref":"s.json"}}}`)},
		{Name: "id-ref", InputSchema: schema(`{"$id":"` + ext.URL + `/root.json","type":"object","properties":{"x":{"$ref":"s.json"}}}`)},
		{Name: "file-ref", InputSchema: schema(`{"type":"object","properties":{"x":{"$ref":"file:///etc/hostname"}}}`)},
		{Name: "meta", InputSchema: schema(`{"$schema":"` + ext.URL + `/meta.json","type":"object"}`)},
		// Twin: a local reference and a standard dialect compile (the meta-schemas are embedded).
		{Name: "local-ref", InputSchema: schema(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"n":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/n"}}}`)},
		{Name: "draft7", InputSchema: schema(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"type":"integer"}}}`)},
	}
	f := newFixtureWith(t, tools, nil, nil)
	ctx := context.Background()
	for _, op := range []string{"remote-ref", "relative-ref", "id-ref", "file-ref", "meta"} {
		_, err := f.s.Describe(ctx, alice, op, "files")
		if !errors.Is(err, invocation.ErrRemoteReference) || !errors.Is(err, invocation.ErrInvalidSchema) || refusal(err) != "invalid_schema" {
			t.Fatalf("%s: %v", op, err)
		}
		// Invoke refuses the same way, with a hand-computed lease.
		lease := f.lease(t, alice.Seed, op)
		_, err = f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: lease, Operation: op, Connection: "files", Arguments: json.RawMessage(`{"x":1}`)})
		if !errors.Is(err, invocation.ErrRemoteReference) || refusal(err) != "invalid_schema" {
			t.Fatalf("%s invoke: %v", op, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the schema loader fetched %d external resources", n)
	}
	for _, op := range []string{"local-ref", "draft7"} {
		d := f.describe(t, alice, op)
		call := func(args string) error {
			_, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: op, Connection: "files", Arguments: json.RawMessage(args)})
			return err
		}
		if err := call(`{"x":1}`); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		var ia *invocation.InvalidArgumentsError
		if err := call(`{"x":"one"}`); !errors.As(err, &ia) || ia.Pointer != "/x" {
			t.Fatalf("%s with a string: %v", op, err)
		}
	}
}
