// Package refusal is the one shape every named refusal of connector-mcp shares, and the one way to
// read a refusal's name.
//
// A refusal is an error that says, by a stable snake_case name, which rule refused the input: a
// bound ("frame_too_large"), a policy ("wrong_source_ref"), a malformed document
// ("duplicate_key"). Each library keeps its own error types, sentinels (ErrX, matched with
// errors.Is) and exported name constants (RefusalX); every such error implements [Named]. Callers
// read the name with [Name], wherever the refusal sits in an error tree, instead of asserting an
// anonymous interface of their own.
//
// The package imports nothing of this module, so every layer (snapshot, mcpclient, ocipack, egress,
// the controllers, the CLI) may depend on it. It is public because the refusals it reads are part
// of public APIs: a program outside this module that uses mcpclient, ocipack or snapshot reads their
// refusal names the same way.
package refusal

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Named is the shape every refusal of this module shares: an error whose Refusal method returns a
// stable snake_case name (see [Valid]). Its Error text carries no secrets, request or response
// bodies, or remote prose; server- or document-chosen identifiers in it are bounded with [Clip].
type Named interface {
	error
	// Refusal returns the stable refusal name, e.g. "frame_too_large".
	Refusal() string
}

// As returns the first error in err's tree (errors.As order) that is [Named].
func As(err error) (Named, bool) {
	var n Named
	if errors.As(err, &n) {
		return n, true
	}
	return nil, false
}

// Name returns the refusal name of the first [Named] error in err's tree, or "" when err is not
// (and wraps no) refusal.
func Name(err error) string {
	if n, ok := As(err); ok {
		return n.Refusal()
	}
	return ""
}

// Has reports whether err's refusal name (see [Name]) is name. An empty name never matches.
func Has(err error, name string) bool {
	return name != "" && Name(err) == name
}

// MaxNameLen bounds a refusal name (see [Valid]).
const MaxNameLen = 64

// Valid reports whether name is a well-formed refusal name: 1 to MaxNameLen bytes of lower-case
// ASCII letters, digits and single underscores, starting with a letter and not ending with an
// underscore ("wrong_source_ref"). Condition messages, CLI output ("refused: NAME") and metrics
// labels rely on this form.
func Valid(name string) bool {
	if name == "" || len(name) > MaxNameLen || name[0] < 'a' || name[0] > 'z' || name[len(name)-1] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_' && name[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// Ellipsis marks a string that [Clip] shortened.
const Ellipsis = "..."

// Clip bounds s, an identifier that may come from a remote server, a registry or a document,
// before it goes into an error message: a string of at most max bytes is returned as is; a longer
// one is cut to at most max bytes on a UTF-8 boundary (never splitting a character) and marked
// with [Ellipsis]; each run of invalid UTF-8 in the kept part becomes U+FFFD, so the result is
// valid UTF-8. A max below 1 is treated as 1.
func Clip(s string, max int) string {
	if max < 1 {
		max = 1
	}
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + Ellipsis
}

// Truncate bounds s to at most max bytes with no marker, for values that land in a field with a
// hard length limit (an API schema's maxLength, a condition message): a string of at most max
// bytes is returned as is; a longer one is cut to max bytes and every invalid UTF-8 byte in the
// kept part (a character split by the cut included) is dropped, so the result is valid UTF-8 and
// never longer than max. A max below 0 is treated as 0.
func Truncate(s string, max int) string {
	if max < 0 {
		max = 0
	}
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "")
}
