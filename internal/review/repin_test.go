package review

import (
	"errors"
	"reflect"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
)

// reviewedDoc returns a reviewed profile document over descs, every effect set to effect.
func reviewedDoc(t *testing.T, effect apiv1.Effect, descs ...string) *apiv1.ProfileDocument {
	t.Helper()
	doc := ocipack.Draft(snap(t, "2025-11-25", descs...))
	for i := range doc.Operations {
		doc.Operations[i].Effect = effect
		doc.Operations[i].Title = "Reviewed " + doc.Operations[i].RemoteName
	}
	if err := ocipack.Validate(doc); err != nil {
		t.Fatalf("reviewed document invalid: %v", err)
	}
	return doc
}

func TestRepin(t *testing.T) {
	keep := `{"name":"list_files","inputSchema":{"type":"object"}}`
	gone := `{"name":"write_file","inputSchema":{"type":"object"}}`
	changed := `{"name":"read_file","description":"Read a file","inputSchema":{"type":"object"}}`
	doc := reviewedDoc(t, apiv1.EffectRead, keep, gone, base)
	cand := snap(t, "2026-07-28", keep, changed, `{"name":"List Files!","inputSchema":{"type":"object"}}`)

	got, err := Repin(doc, cand)
	if err != nil {
		t.Fatal(err)
	}
	nd := got.Document
	if nd.Snapshot.Digest != cand.Digest || nd.Snapshot.ProtocolVersion != "2026-07-28" || len(nd.Snapshot.Tools) != 3 {
		t.Fatalf("snapshot = %+v, want the candidate", nd.Snapshot)
	}
	ops := map[string]apiv1.OperationMapping{}
	for _, o := range nd.Operations {
		ops[o.RemoteName] = o
	}
	if o := ops["list_files"]; o.Effect != apiv1.EffectRead || o.Title != "Reviewed list_files" {
		t.Errorf("unchanged tool mapping = %+v, want kept", o)
	}
	if o := ops["read_file"]; o.Effect != apiv1.EffectUnreviewed || o.Title != "Reviewed read_file" || o.OperationRef != "read_file" {
		t.Errorf("changed tool mapping = %+v, want kept with effect unreviewed", o)
	}
	// "List Files!" derives "list-files", distinct from the kept "list_files".
	if o := ops["List Files!"]; o.Effect != apiv1.EffectUnreviewed || o.OperationRef != "list-files" || o.Title != "List Files!" {
		t.Errorf("new tool mapping = %+v, want an unreviewed placeholder", o)
	}
	if _, ok := ops["write_file"]; ok || !reflect.DeepEqual(got.Dropped, []string{"write_file"}) {
		t.Errorf("removed tool kept (dropped = %v)", got.Dropped)
	}
	wantMarks := []Mark{
		{Tool: "List Files!", OperationRef: "list-files", Kind: KindAdded, Classes: []string{ClassNewTool}},
		{Tool: "read_file", OperationRef: "read_file", Kind: KindChanged, PreviousEffect: apiv1.EffectRead, Classes: got.Marks[1].Classes},
	}
	if !reflect.DeepEqual(got.Marks, wantMarks) || len(got.Marks[1].Classes) == 0 {
		t.Errorf("marks = %+v, want %+v", got.Marks, wantMarks)
	}
	// The repinned document is a valid draft, refused as reviewed until every mark is cleared.
	if err := ocipack.ValidateDraft(nd); err != nil {
		t.Fatalf("repinned document is not a valid draft: %v", err)
	}
	if err := ocipack.Validate(nd); !errors.Is(err, ocipack.ErrUnreviewedEffect) {
		t.Fatalf("Validate(repinned) = %v, want unreviewed", err)
	}
	for i := range nd.Operations {
		if nd.Operations[i].Effect == apiv1.EffectUnreviewed {
			nd.Operations[i].Effect = apiv1.EffectWrite
		}
	}
	if err := ocipack.Validate(nd); err != nil {
		t.Fatalf("Validate after review = %v", err)
	}
	// The reviewed document itself is untouched.
	if doc.Operations[0].Effect != apiv1.EffectRead || len(doc.Operations) != 3 {
		t.Error("Repin changed its input")
	}
}

func TestRepinUnchangedKeepsEverything(t *testing.T) {
	doc := reviewedDoc(t, apiv1.EffectDestructive, base)
	got, err := Repin(doc, snap(t, "2025-11-25", base))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Marks) != 0 || !reflect.DeepEqual(got.Document, doc) {
		t.Errorf("repin without drift changed the document: marks %+v", got.Marks)
	}
}

func TestRepinRefusesTamperedProfile(t *testing.T) {
	doc := reviewedDoc(t, apiv1.EffectRead, base)
	doc.Snapshot.Tools[0].Descriptor.Raw = []byte(`{"name":"read_file"}`)
	_, err := Repin(doc, snap(t, "2025-11-25", base))
	var re *Error
	if !errors.As(err, &re) || re.Name != RefusalInvalidSnapshot || !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("err = %v, want invalid_snapshot", err)
	}
}
