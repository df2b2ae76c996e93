package snapshot

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/refusal"
)

// Stable refusal names returned by the Refusal methods of this package's errors (see
// [refusal.Name]).
const (
	// RefusalInvalidJSON: input is not exactly one well-formed JSON value (ErrInvalidJSON).
	RefusalInvalidJSON = "invalid_json"
	// RefusalInvalidUTF8: invalid UTF-8 or an unpaired escaped surrogate (ErrInvalidUTF8).
	RefusalInvalidUTF8 = "invalid_utf8"
	// RefusalDuplicateKey: an object repeats a member name (ErrDuplicateKey).
	RefusalDuplicateKey = "duplicate_key"
	// RefusalUnsafeNumber: a number RFC 8785 would not determine (ErrUnsafeNumber).
	RefusalUnsafeNumber = "unsafe_number"
	// RefusalInvalidDescriptor: a descriptor is not an object with a non-empty string name
	// (ErrInvalidDescriptor).
	RefusalInvalidDescriptor = "invalid_descriptor"
	// RefusalDuplicateToolName: two descriptors share a name (ErrDuplicateToolName).
	RefusalDuplicateToolName = "duplicate_tool_name"
	// RefusalDigestMismatch: a recorded digest differs from the reconstructed one
	// (ErrDigestMismatch).
	RefusalDigestMismatch = "digest_mismatch"
)

// maxIdentInError bounds a server-chosen identifier (a tool name) in an error message.
const maxIdentInError = 64

var (
	// ErrInvalidJSON is the reason for input that is not exactly one well-formed JSON value
	// (refusal "invalid_json").
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrInvalidUTF8 is the reason for input with invalid UTF-8 or an unpaired escaped surrogate
	// (refusal "invalid_utf8").
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrDuplicateKey is the reason for an object with a repeated member name at any depth
	// (refusal "duplicate_key").
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrUnsafeNumber is the reason for a number whose RFC 8785 canonical form would not
	// determine it (refusal "unsafe_number"): an integer literal beyond ±(2^53-1), excess
	// precision, underflow of a non-zero literal to zero, overflow, negative zero.
	ErrUnsafeNumber = errors.New("number not safe to canonicalize")
	// ErrInvalidDescriptor is the reason for a tool descriptor that is not a JSON object with a
	// non-empty string "name" (refusal "invalid_descriptor").
	ErrInvalidDescriptor = errors.New("invalid tool descriptor")
	// ErrDuplicateToolName is the reason for two descriptors with the same name (refusal
	// "duplicate_tool_name").
	ErrDuplicateToolName = errors.New("duplicate tool name")
	// ErrDigestMismatch is the reason Verify fails: a recorded digest differs from the one
	// reconstructed from the recorded descriptors (refusal "digest_mismatch").
	ErrDigestMismatch = errors.New("digest mismatch")
)

// RefusalError is a named refusal of this package. Errors never carry descriptor text: only the
// refusal name, the tool name (when known), a JSON Pointer and a byte offset.
type RefusalError struct {
	// Name is the stable refusal name, e.g. "duplicate_key".
	Name string
	// Tool is the name of the tool whose descriptor was refused, when known.
	Tool string
	// Path is the JSON Pointer of the object holding the offending member, when known.
	Path string
	// Offset is the byte offset in the refused document, when known (0 otherwise).
	Offset int64
	// Err is the sentinel reason (ErrDuplicateKey, ...), matched with errors.Is.
	Err error
}

// Refusal returns the stable refusal name.
func (e *RefusalError) Refusal() string { return e.Name }

// Unwrap returns the sentinel reason.
func (e *RefusalError) Unwrap() error { return e.Err }

// Error describes the failure without server text.
func (e *RefusalError) Error() string {
	msg := "snapshot: " + e.Name
	if e.Tool != "" {
		msg += fmt.Sprintf(" in tool %q", refusal.Clip(e.Tool, maxIdentInError))
	}
	if e.Offset > 0 {
		msg += fmt.Sprintf(" at byte %d", e.Offset)
	}
	return msg
}

// MismatchError reports a recorded digest that differs from the reconstructed one (refusal
// "digest_mismatch"). Tool is empty for the snapshot digest itself.
type MismatchError struct {
	// Tool names the tool whose descriptor digest differs; empty for the snapshot digest.
	Tool string
	// Recorded is the digest stored in the snapshot.
	Recorded string
	// Computed is the digest reconstructed from the recorded descriptors.
	Computed string
}

// Refusal returns RefusalDigestMismatch.
func (e *MismatchError) Refusal() string { return RefusalDigestMismatch }

// Unwrap returns ErrDigestMismatch.
func (e *MismatchError) Unwrap() error { return ErrDigestMismatch }

// Error describes the failure without server text.
func (e *MismatchError) Error() string {
	if e.Tool == "" {
		return fmt.Sprintf("snapshot: digest_mismatch: snapshot digest recorded %s, computed %s", e.Recorded, e.Computed)
	}
	return fmt.Sprintf("snapshot: digest_mismatch: tool %q recorded %s, computed %s", refusal.Clip(e.Tool, maxIdentInError), e.Recorded, e.Computed)
}

// Every refusal of this package has the shared shape.
var (
	_ refusal.Named = (*RefusalError)(nil)
	_ refusal.Named = (*MismatchError)(nil)
)
