package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of raw.
//
// Input that RFC 8785 (I-JSON, RFC 7493) does not admit is refused rather than repaired:
// invalid UTF-8 or an unpaired escaped surrogate (ErrInvalidUTF8), a repeated member name in any
// object at any depth (ErrDuplicateKey), malformed JSON or trailing data after the value
// (ErrInvalidJSON). So is a number whose canonical form would not determine it (ErrUnsafeNumber,
// refusal "unsafe_number"): an integer literal beyond ±(2^53-1), a literal with more precision
// than an IEEE-754 double, a non-zero literal that underflows to zero, one that overflows, and
// negative zero. RFC 8785 reads numbers as doubles, so without this 9007199254740993 and
// 9007199254740992, 1e-400 and 0, or -0 and 0 would share a canonical form and a digest; with
// it, two documents share a canonical form only if their numbers are the same numbers. The
// returned error is a *RefusalError.
func Canonicalize(raw []byte) ([]byte, error) {
	w, err := canonicalWalk(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	if w.out == nil {
		w.out = []byte{}
	}
	return w.out, nil
}

// Validate checks that raw is one well-formed JSON value: valid UTF-8, no unpaired surrogate
// escapes, no duplicate keys at any depth, no trailing data. Unlike Canonicalize it admits every
// JSON number: it is the check for documents that are passed on byte for byte (call arguments,
// call results), not digested. The error is a *RefusalError.
func Validate(raw []byte) error { return validate(raw, scanWellFormed, nil) }

// DescriptorDigest returns "sha256:<hex>" over the RFC 8785 canonical form of raw. It refuses the
// same input as Canonicalize.
func DescriptorDigest(raw []byte) (string, error) {
	c, err := Canonicalize(raw)
	if err != nil {
		return "", err
	}
	return sha256Digest(c), nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestString(sum[:])
}

// digestString renders a sha256 sum as "sha256:<hex>" in one allocation.
func digestString(sum []byte) string {
	var buf [len("sha256:") + 2*sha256.Size]byte
	copy(buf[:], "sha256:")
	hex.Encode(buf[len("sha256:"):], sum)
	return string(buf[:])
}

// validate refuses raw unless it is exactly one well-formed I-JSON value (scanDigest: with safe
// numbers only); warn, when not nil, receives each Unicode finding with its JSON Pointer.
func validate(raw []byte, mode scanMode, warn func(path, code string)) error {
	_, err := validateWalk(raw, mode, warn)
	return err
}

// pointer renders a path as an RFC 6901 JSON Pointer ("" is the whole document).
func pointer(path []string) string {
	if len(path) == 0 {
		return ""
	}
	var b bytes.Buffer
	for _, p := range path {
		b.WriteByte('/')
		for _, r := range p {
			switch r {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
