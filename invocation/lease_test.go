package invocation_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/invocation"
)

// The lease formula, spelled out: sha256 over the literal RFC 8785 document.
func TestLeaseVector(t *testing.T) {
	snap := "sha256:" + "ab"[0:2] + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	got, err := invocation.Lease(snap, "serviceaccount:u-1 \"é\"", "add", "files")
	if err != nil {
		t.Fatal(err)
	}
	canon := `{"connection":"files","operation":"add","seed":"serviceaccount:u-1 \"é\"","snapshot":"` + snap + `","type":"b10x.connector-mcp-lease.v1"}`
	sum := sha256.Sum256([]byte(canon))
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("lease %s, want %s", got, want)
	}
	// Twin: every input is bound; changing any one changes the lease.
	for _, in := range [][4]string{
		{snap[:len(snap)-1] + "e", "serviceaccount:u-1 \"é\"", "add", "files"},
		{snap, "serviceaccount:u-2", "add", "files"},
		{snap, "serviceaccount:u-1 \"é\"", "echo", "files"},
		{snap, "serviceaccount:u-1 \"é\"", "add", "files-2"},
	} {
		other, err := invocation.Lease(in[0], in[1], in[2], in[3])
		if err != nil || other == got {
			t.Fatalf("%q: lease %s (%v) equals the original", in, other, err)
		}
	}
}

func TestLeaseRefusesInvalidInput(t *testing.T) {
	for _, in := range [][4]string{
		{"", "s", "o", "c"}, {"d", "", "o", "c"}, {"d", "s", "", "c"}, {"d", "s", "o", ""},
		// json.Marshal would turn both seeds into U+FFFD and make them collide.
		{"d", "\xff", "o", "c"}, {"d", "\xfe", "o", "c"},
	} {
		if _, err := invocation.Lease(in[0], in[1], in[2], in[3]); !errors.Is(err, invocation.ErrInvalidCaller) {
			t.Fatalf("%q: %v", in, err)
		}
	}
	if _, err := invocation.Lease("d", "s", "o", "c"); err != nil {
		t.Fatal(err)
	}
}

func TestIdentitySeed(t *testing.T) {
	sa := invocation.Caller{User: "system:serviceaccount:team-a:agent", UID: "u-1"}
	recreated := invocation.Caller{User: sa.User, UID: "u-2"}
	if invocation.IdentitySeed(sa) != "uid:u-1" || invocation.IdentitySeed(sa) == invocation.IdentitySeed(recreated) {
		t.Fatalf("seeds %q %q", invocation.IdentitySeed(sa), invocation.IdentitySeed(recreated))
	}
	// Twin: without a UID the user name is the seed, and groups never matter.
	a := invocation.Caller{User: "alice", Groups: []string{"x"}}
	b := invocation.Caller{User: "alice", Groups: []string{"y"}}
	if invocation.IdentitySeed(a) != "user:alice" || invocation.IdentitySeed(a) != invocation.IdentitySeed(b) {
		t.Fatalf("seeds %q %q", invocation.IdentitySeed(a), invocation.IdentitySeed(b))
	}
}

// The RBAC attributes are the API's own group and resource.
func TestRBACAttributes(t *testing.T) {
	if invocation.Group != apiv1.GroupVersion.Group || invocation.Resource != "servicedeployments" || invocation.Verb != "invoke" {
		t.Fatalf("%s %s %s", invocation.Group, invocation.Resource, invocation.Verb)
	}
	r := invocation.Review(invocation.Caller{User: "u", Extra: map[string][]string{"k": {"v"}}}, invocation.Target{Namespace: "ns", Name: "n"})
	ra := r.Spec.ResourceAttributes
	if ra.Group != apiv1.GroupVersion.Group || ra.Namespace != "ns" || ra.Name != "n" || r.Spec.Extra["k"][0] != "v" {
		t.Fatalf("review %+v", r.Spec)
	}
}
