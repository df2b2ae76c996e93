package invocation_test

import (
	"testing"
	"unicode/utf8"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
)

// FuzzLeaseFieldsAreSeparated: the lease is deterministic, and moving a value from one member to
// another (operation and Connection, seed and operation, operation and remote name, snapshot and
// profile) changes it; no concatenation ambiguity. Changing the effect alone changes it too.
func FuzzLeaseFieldsAreSeparated(f *testing.F) {
	f.Add("sha256:00", "sha256:01", "seed", "add", "sum", "files")
	f.Add("sha256:00", "sha256:00", "a\"b", "a", "a", "a\"b")
	f.Add("d", "p", "x,y", "x", "y", "y")
	f.Fuzz(func(t *testing.T, snap, profile, seed, op, remote, conn string) {
		for _, v := range []string{snap, profile, seed, op, remote, conn} {
			if v == "" || !utf8.ValidString(v) {
				return
			}
		}
		in := invocation.LeaseInput{Snapshot: snap, Profile: profile, Seed: seed, Operation: op, RemoteName: remote,
			Effect: apiv1.EffectRead, Connection: conn}
		a, err := invocation.Lease(in)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := invocation.Lease(in); a != b {
			t.Fatal("not deterministic")
		}
		swaps := []struct {
			name   string
			differ bool
			moved  func(l *invocation.LeaseInput)
		}{
			{"operation and Connection", op != conn, func(l *invocation.LeaseInput) { l.Operation, l.Connection = conn, op }},
			{"seed and operation", seed != op, func(l *invocation.LeaseInput) { l.Seed, l.Operation = op, seed }},
			{"operation and remote name", op != remote, func(l *invocation.LeaseInput) { l.Operation, l.RemoteName = remote, op }},
			{"snapshot and profile", snap != profile, func(l *invocation.LeaseInput) { l.Snapshot, l.Profile = profile, snap }},
			{"effect", true, func(l *invocation.LeaseInput) { l.Effect = apiv1.EffectWrite }},
		}
		for _, s := range swaps {
			if !s.differ {
				continue
			}
			other := in
			s.moved(&other)
			if b, _ := invocation.Lease(other); a == b {
				t.Fatalf("%s swapped give the same lease", s.name)
			}
		}
	})
}
