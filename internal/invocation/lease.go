package invocation

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// LeaseType is the domain-separation member of the lease document: a lease can never be
// confused with a digest of any other document, nor with a lease of an earlier version (v1
// bound neither the profile digest nor the operation's remote name and effect).
const LeaseType = "b10x.connector-mcp-lease.v2"

// LeaseInput is what a lease binds: the frozen snapshot, the reviewed profile, the caller, and
// the operation as the review mapped and classified it.
type LeaseInput struct {
	// Snapshot is the frozen snapshot digest ("sha256:<hex>").
	Snapshot string
	// Profile is the reviewed profile digest (ocipack.ProfileDigest of the document, the
	// deployment's status.profileDigest).
	Profile string
	// Seed is the caller's stable authority seed (Caller.Seed).
	Seed string
	// Operation is the locally owned operation reference.
	Operation string
	// RemoteName is the remote tool name the review mapped the operation to.
	RemoteName string
	// Effect is the reviewed effect of the operation (read, write or destructive).
	Effect apiv1.Effect
	// Connection is the Connection reference.
	Connection string
}

// Lease computes the lease for in:
//
//	lease = lowercase hex( sha256( JCS({
//	    "connection": in.Connection,
//	    "effect":     in.Effect,
//	    "operation":  in.Operation,
//	    "profile":    in.Profile,
//	    "remoteName": in.RemoteName,
//	    "seed":       in.Seed,
//	    "snapshot":   in.Snapshot,
//	    "type":       "b10x.connector-mcp-lease.v2",
//	}) ) )
//
// where JCS is the RFC 8785 canonical form (members sorted, no whitespace, minimal string
// escapes) as computed by snapshot.Canonicalize. The result is 64 hexadecimal characters.
// Every input must be non-empty, valid UTF-8; otherwise Lease fails with ErrInvalidCaller (JSON
// encoding would silently replace invalid bytes and make two different seeds collide).
//
// Because the profile digest, the remote name and the effect are bound, a re-review that remaps
// an operation to another remote tool or re-classifies its effect makes every lease issued
// before it stale, even over the same frozen snapshot; a re-review that yields the same
// document yields the same leases.
//
// A lease is not a secret and grants nothing: it binds a later Invoke to what Describe showed.
// Authorization is decided on every call.
func Lease(in LeaseInput) (string, error) {
	for _, v := range []string{in.Snapshot, in.Profile, in.Seed, in.Operation, in.RemoteName, string(in.Effect), in.Connection} {
		if v == "" || !utf8.ValidString(v) {
			return "", ErrInvalidCaller
		}
	}
	doc, err := json.Marshal(map[string]string{
		"connection": in.Connection,
		"effect":     string(in.Effect),
		"operation":  in.Operation,
		"profile":    in.Profile,
		"remoteName": in.RemoteName,
		"seed":       in.Seed,
		"snapshot":   in.Snapshot,
		"type":       LeaseType,
	})
	if err != nil {
		return "", err
	}
	canon, err := snapshot.Canonicalize(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// leaseEqual compares two leases in constant time.
func leaseEqual(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
