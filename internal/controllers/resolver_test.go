package controllers

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/b10x/connector-mcp/internal/activation"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// countingVerifier verifies every pack as doc, counting the verifications.
type countingVerifier struct {
	doc   *v1.ProfileDocument
	calls atomic.Int64
}

func (c *countingVerifier) VerifyPack(context.Context, activation.VerifyRequest) (*activation.VerifiedSource, error) {
	c.calls.Add(1)
	return &activation.VerifiedSource{Document: c.doc.DeepCopy(), PackDigest: "sha256:" + "ab"}, nil
}

// The resolver memo is a bounded LRU: past MemoSize the least recently used profile is
// forgotten and verified again on its next use, with the same result.
func TestResolverMemoIsBounded(t *testing.T) {
	doc := testDoc(t, "2026-07-28", toolA, toolB)
	profile := func(uid string) *v1.McpServiceProfile {
		return &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uid, UID: types.UID(uid), Generation: 1},
			Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{OCI: &v1.OCISource{Ref: "registry.example/p@sha256:" + "ab"}}}}
	}
	resolve := func(r *activation.Resolver, p *v1.McpServiceProfile) *activation.Resolved {
		t.Helper()
		res, serr := r.Resolve(context.Background(), p)
		if serr != nil {
			t.Fatal(serr)
		}
		return res
	}
	v := &countingVerifier{doc: doc}
	r := &activation.Resolver{Verifier: v, MemoSize: 1}
	a, b := profile("a"), profile("b")
	first := resolve(r, a)
	if again := resolve(r, a); again != first || v.calls.Load() != 1 {
		t.Fatalf("memo miss within the bound: %d verifications", v.calls.Load())
	}
	resolve(r, b) // evicts a
	after := resolve(r, a)
	if v.calls.Load() != 3 || after == first {
		t.Fatalf("%d verifications, want 3: a was not evicted", v.calls.Load())
	}
	if after.ProfileDigest != first.ProfileDigest || after.Snapshot.Digest != first.Snapshot.Digest {
		t.Fatalf("re-verified after eviction to %s, was %s", after.ProfileDigest, first.ProfileDigest)
	}
	// Twin: the default bound keeps both profiles.
	w := &countingVerifier{doc: doc}
	d := &activation.Resolver{Verifier: w}
	for _, p := range []*v1.McpServiceProfile{a, b, a, b} {
		resolve(d, p)
	}
	if w.calls.Load() != 2 {
		t.Fatalf("%d verifications with the default bound, want 2", w.calls.Load())
	}
}
