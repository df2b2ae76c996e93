package packstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// Entry names are valid ConfigMap names, carry the digest, and differ per repository of one
// digest (the store serves an entry only for the exact reference). The store reads and writes
// against a real apiserver in test/envtest (TestVerifiedPackStoreEntriesAndSweep and the
// restart-outage stories).
func TestName(t *testing.T) {
	hexDigest := strings.Repeat("ab", 32)
	a, err := ociregistry.ParseDigestReference("registry.example.com/team/a@sha256:" + hexDigest)
	if err != nil {
		t.Fatal(err)
	}
	b := a
	b.Repository = "team/b"
	na, nb := Name(a), Name(b)
	if errs := validation.IsDNS1123Subdomain(na); len(errs) > 0 {
		t.Fatalf("%q: %v", na, errs)
	}
	if !strings.HasPrefix(na, NamePrefix+hexDigest+"-") || na == nb || Name(a) != na {
		t.Fatalf("names %q and %q", na, nb)
	}
	if k := blobKey("sha256:" + hexDigest); len(validation.IsConfigMapKey(k)) > 0 {
		t.Fatalf("blob key %q is not a ConfigMap key", k)
	}
}

func TestNewNeedsNamespace(t *testing.T) {
	if _, err := New("", nil, nil, 0, logr.Discard()); !errors.Is(err, ErrInvalidNamespace) {
		t.Fatalf("got %v, want ErrInvalidNamespace", err)
	}
	s, err := New("ns", nil, nil, 0, logr.Discard())
	if err != nil || s.maxBytes != DefaultMaxBytes || s.Namespace() != "ns" {
		t.Fatalf("%+v %v", s, err)
	}
}

// A store without a writer (the gateway's) refuses to save before any request (its reader and
// writer are nil here: a request would panic).
func TestReadOnlyStoreSavesNothing(t *testing.T) {
	s, err := New("ns", nil, nil, 0, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ociregistry.ParseDigestReference("registry.example.com/team/a@sha256:" + strings.Repeat("cd", 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(t.Context(), &ociregistry.StoredPack{Reference: ref}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("got %v, want ErrReadOnly", err)
	}
}
