package invocation_test

import (
	"testing"
	"unicode/utf8"

	"github.com/b10x/connector-mcp/invocation"
)

// FuzzLeaseFieldsAreSeparated: the lease is deterministic, and moving a value from one member to
// another (operation and Connection, seed and operation) changes it; no concatenation ambiguity.
func FuzzLeaseFieldsAreSeparated(f *testing.F) {
	f.Add("sha256:00", "seed", "add", "files")
	f.Add("sha256:00", "a\"b", "a", "a\"b")
	f.Add("d", "x,y", "x", "y")
	f.Fuzz(func(t *testing.T, snap, seed, op, conn string) {
		for _, v := range []string{snap, seed, op, conn} {
			if v == "" || !utf8.ValidString(v) {
				return
			}
		}
		a, err := invocation.Lease(snap, seed, op, conn)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := invocation.Lease(snap, seed, op, conn); a != b {
			t.Fatal("not deterministic")
		}
		if op != conn {
			if b, _ := invocation.Lease(snap, seed, conn, op); a == b {
				t.Fatalf("operation and Connection swapped give the same lease")
			}
		}
		if seed != op {
			if b, _ := invocation.Lease(snap, op, seed, conn); a == b {
				t.Fatalf("seed and operation swapped give the same lease")
			}
		}
	})
}
