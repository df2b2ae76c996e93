package invocation

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"

	"github.com/b10x/connector-mcp/snapshot"
)

// LeaseType is the domain-separation member of the lease document: a lease can never be
// confused with a digest of any other document.
const LeaseType = "b10x.connector-mcp-lease.v1"

// Lease computes the lease for one frozen snapshot digest, caller-authority seed, operation
// reference and Connection reference:
//
//	lease = lowercase hex( sha256( JCS({
//	    "connection": connection,
//	    "operation":  operation,
//	    "seed":       seed,
//	    "snapshot":   snapshotDigest,
//	    "type":       "b10x.connector-mcp-lease.v1",
//	}) ) )
//
// where JCS is the RFC 8785 canonical form (members sorted, no whitespace, minimal string
// escapes) as computed by snapshot.Canonicalize. The result is 64 hexadecimal characters.
// Every input must be non-empty, valid UTF-8; otherwise Lease fails with ErrInvalidCaller (JSON
// encoding would silently replace invalid bytes and make two different seeds collide).
//
// A lease is not a secret and grants nothing: it binds a later Invoke to what Describe showed.
// Authorization is decided on every call.
func Lease(snapshotDigest, seed, operation, connection string) (string, error) {
	for _, v := range []string{snapshotDigest, seed, operation, connection} {
		if v == "" || !utf8.ValidString(v) {
			return "", ErrInvalidCaller
		}
	}
	doc, err := json.Marshal(map[string]string{
		"connection": connection,
		"operation":  operation,
		"seed":       seed,
		"snapshot":   snapshotDigest,
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
