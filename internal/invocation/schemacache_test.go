package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/b10x/connector-mcp/internal/invocation"
)

// The schema cache is a bounded LRU: past its size the least recently used schema is evicted
// and compiled again on its next use, and validation after the eviction is as strict as before.
func TestSchemaCacheEvicts(t *testing.T) {
	cache := invocation.NewSchemaCacheSize(1)
	f := newFixture(t, nil, func(o *invocation.Options) { o.Schemas = cache })
	ctx := context.Background()
	invoke := func(op, args string) error {
		d := f.describe(t, alice, op)
		_, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: op, Connection: "files", Arguments: json.RawMessage(args)})
		return err
	}
	if err := invoke("transfer", `{"amount":2,"to":"bob"}`); err != nil {
		t.Fatal(err)
	}
	if err := invoke("add", `{"a":1,"b":2}`); err != nil { // evicts transfer
		t.Fatal(err)
	}
	if n, l := cache.Compilations(), cache.Len(); n != 2 || l != 1 {
		t.Fatalf("%d compilations, %d cached; want 2, 1", n, l)
	}
	// transfer was evicted: compiled again, and still refuses what its schema refuses.
	var iae *invocation.InvalidArgumentsError
	if err := invoke("transfer", `{"amount":0,"to":"bob"}`); !errors.As(err, &iae) || iae.Keyword == "" {
		t.Fatalf("after eviction: %v", err)
	}
	if n := cache.Compilations(); n != 3 {
		t.Fatalf("%d compilations after the eviction, want 3", n)
	}
	if err := invoke("transfer", `{"amount":3,"to":"bob"}`); err != nil {
		t.Fatal(err)
	}
	// Twin: within the bound nothing is evicted and nothing compiles twice.
	big := invocation.NewSchemaCache()
	g := newFixture(t, nil, func(o *invocation.Options) { o.Schemas = big })
	for _, op := range []string{"transfer", "add", "transfer", "add"} {
		g.describe(t, alice, op)
	}
	if n := big.Compilations(); n != 2 {
		t.Fatalf("%d compilations within the bound, want 2", n)
	}
}
