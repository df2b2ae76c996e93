package invocation_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
)

// leaseIn is a valid lease input for the table tests.
func leaseIn() invocation.LeaseInput {
	return invocation.LeaseInput{
		Snapshot:   "sha256:ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd",
		Profile:    "sha256:cd0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd",
		Seed:       "serviceaccount:u-1 \"é\"",
		Operation:  "add",
		RemoteName: "sum",
		Effect:     apiv1.EffectRead,
		Connection: "files",
	}
}

// The lease formula, spelled out: sha256 over the literal RFC 8785 document.
func TestLeaseVector(t *testing.T) {
	in := leaseIn()
	got, err := invocation.Lease(in)
	if err != nil {
		t.Fatal(err)
	}
	canon := `{"connection":"files","effect":"read","operation":"add","profile":"` + in.Profile + `","remoteName":"sum","seed":"serviceaccount:u-1 \"é\"","snapshot":"` + in.Snapshot + `","type":"b10x.connector-mcp-lease.v2"}`
	sum := sha256.Sum256([]byte(canon))
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("lease %s, want %s", got, want)
	}
	if invocation.LeaseType != "b10x.connector-mcp-lease.v2" {
		t.Fatalf("lease type %q", invocation.LeaseType)
	}
	// Twin: every input is bound; changing any one changes the lease.
	for name, change := range map[string]func(*invocation.LeaseInput){
		"snapshot":        func(l *invocation.LeaseInput) { l.Snapshot = l.Snapshot[:len(l.Snapshot)-1] + "e" },
		"profile":         func(l *invocation.LeaseInput) { l.Profile = l.Profile[:len(l.Profile)-1] + "e" },
		"seed":            func(l *invocation.LeaseInput) { l.Seed = "serviceaccount:u-2" },
		"operation":       func(l *invocation.LeaseInput) { l.Operation = "echo" },
		"remote name":     func(l *invocation.LeaseInput) { l.RemoteName = "sum_v2" },
		"effect write":    func(l *invocation.LeaseInput) { l.Effect = apiv1.EffectWrite },
		"effect destroys": func(l *invocation.LeaseInput) { l.Effect = apiv1.EffectDestructive },
		"connection":      func(l *invocation.LeaseInput) { l.Connection = "files-2" },
	} {
		other := leaseIn()
		change(&other)
		if l, err := invocation.Lease(other); err != nil || l == got {
			t.Fatalf("%s changed: lease %s (%v) equals the original", name, l, err)
		}
	}
	// Twin: the same input, the same lease.
	if again, err := invocation.Lease(leaseIn()); err != nil || again != got {
		t.Fatalf("lease not deterministic: %s %v", again, err)
	}
}

func TestLeaseRefusesInvalidInput(t *testing.T) {
	for name, change := range map[string]func(*invocation.LeaseInput){
		"no snapshot":    func(l *invocation.LeaseInput) { l.Snapshot = "" },
		"no profile":     func(l *invocation.LeaseInput) { l.Profile = "" },
		"no seed":        func(l *invocation.LeaseInput) { l.Seed = "" },
		"no operation":   func(l *invocation.LeaseInput) { l.Operation = "" },
		"no remote name": func(l *invocation.LeaseInput) { l.RemoteName = "" },
		"no effect":      func(l *invocation.LeaseInput) { l.Effect = "" },
		"no connection":  func(l *invocation.LeaseInput) { l.Connection = "" },
		// json.Marshal would turn both seeds into U+FFFD and make them collide.
		"invalid seed ff":   func(l *invocation.LeaseInput) { l.Seed = "\xff" },
		"invalid seed fe":   func(l *invocation.LeaseInput) { l.Seed = "\xfe" },
		"invalid remote ff": func(l *invocation.LeaseInput) { l.RemoteName = "\xff" },
	} {
		in := leaseIn()
		change(&in)
		if _, err := invocation.Lease(in); !errors.Is(err, invocation.ErrInvalidCaller) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := invocation.Lease(leaseIn()); err != nil {
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
