package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
)

// A re-review over the same frozen snapshot that remaps an operation to another remote tool, or
// re-classifies its effect, makes the leases issued before it stale; a re-review that yields the
// same document keeps them.
func TestLeaseStaleAfterReReview(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx := context.Background()
	old := f.describe(t, alice, "add")
	args := json.RawMessage(`{"a":2,"b":40}`)
	invoke := func(s *invocation.Surface, lease string) (*invocation.Result, error) {
		return s.Invoke(ctx, invocation.Request{Caller: alice, Lease: lease, Operation: "add", Connection: "files", Arguments: args})
	}
	rereview := func(t *testing.T, change func(doc *apiv1.ProfileDocument)) *invocation.Surface {
		t.Helper()
		doc := f.doc.DeepCopy()
		change(doc)
		s, err := invocation.NewSurface(doc, deployment(doc, f.srv.URL), f.opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.SnapshotDigest() != f.doc.Snapshot.Digest {
			t.Fatal("the re-review changed the snapshot")
		}
		return s
	}
	op := func(doc *apiv1.ProfileDocument, ref string) *apiv1.OperationMapping {
		for i := range doc.Operations {
			if doc.Operations[i].OperationRef == ref {
				return &doc.Operations[i]
			}
		}
		t.Fatalf("no operation %s", ref)
		return nil
	}

	t.Run("remap", func(t *testing.T) {
		// "add" and "echo" now call each other's remote tool.
		s := rereview(t, func(doc *apiv1.ProfileDocument) {
			a, e := op(doc, "add"), op(doc, "echo")
			a.RemoteName, e.RemoteName = e.RemoteName, a.RemoteName
		})
		if _, err := invoke(s, old.Lease); !errors.Is(err, invocation.ErrStaleLease) || refusal(err) != "stale_lease" {
			t.Fatalf("old lease after the remap: %v", err)
		}
		// Twin: a lease described after the remap is accepted, and calls the newly mapped tool.
		d, err := s.Describe(ctx, alice, "add", "files")
		if err != nil || d.Lease == old.Lease {
			t.Fatalf("describe: %v", err)
		}
		res, err := invoke(s, d.Lease)
		if err != nil || !strings.Contains(string(res.JSON), `{\"a\":2,\"b\":40}`) {
			t.Fatalf("remapped call: %v %s", err, res.JSON)
		}
	})
	t.Run("re-classify", func(t *testing.T) {
		s := rereview(t, func(doc *apiv1.ProfileDocument) { op(doc, "add").Effect = apiv1.EffectWrite })
		if _, err := invoke(s, old.Lease); !errors.Is(err, invocation.ErrStaleLease) {
			t.Fatalf("old lease after the re-classification: %v", err)
		}
		d, err := s.Describe(ctx, alice, "add", "files")
		if err != nil || d.Effect != apiv1.EffectWrite {
			t.Fatalf("describe: %+v %v", d, err)
		}
		if _, err := invoke(s, d.Lease); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unchanged", func(t *testing.T) {
		s := rereview(t, func(*apiv1.ProfileDocument) {})
		d, err := s.Describe(ctx, alice, "add", "files")
		if err != nil || d.Lease != old.Lease {
			t.Fatalf("lease %s (%v), want the old one", d.Lease, err)
		}
		res, err := invoke(s, old.Lease)
		if err != nil || !strings.Contains(string(res.JSON), `"text":"42"`) {
			t.Fatalf("old lease on the unchanged re-review: %v", err)
		}
	})
}
