package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of raw.
//
// Input that RFC 8785 (I-JSON, RFC 7493) does not admit is refused rather than repaired:
// invalid UTF-8 or an unpaired escaped surrogate (ErrInvalidUTF8), a repeated member name in any
// object at any depth (ErrDuplicateKey), malformed JSON, trailing data after the value or a number
// outside the IEEE-754 double range (ErrInvalidJSON). The returned error is a *RefusalError.
func Canonicalize(raw []byte) ([]byte, error) {
	if err := validate(raw, nil); err != nil {
		return nil, err
	}
	return transform(raw)
}

// Validate checks raw as Canonicalize does (one I-JSON value: valid UTF-8, no unpaired
// surrogate escapes, no duplicate keys at any depth, no trailing data) without producing the
// canonical form. The error is a *RefusalError.
func Validate(raw []byte) error { return validate(raw, nil) }

// transform runs the RFC 8785 serializer on input already checked by validate.
func transform(raw []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(raw)
	scalar := len(trimmed) > 0 && trimmed[0] != '{' && trimmed[0] != '['
	in := trimmed
	if scalar {
		// The serializer only accepts an object or array at the top level: wrap and unwrap.
		in = make([]byte, 0, len(trimmed)+2)
		in = append(in, '[')
		in = append(in, trimmed...)
		in = append(in, ']')
	}
	out, err := jsoncanonicalizer.Transform(in)
	if err != nil {
		// Only numbers that do not fit an IEEE-754 double reach here after validation.
		return nil, &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON}
	}
	if scalar {
		out = out[1 : len(out)-1]
	}
	return out, nil
}

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
	return "sha256:" + hex.EncodeToString(sum[:])
}

// walker checks a JSON document token by token: duplicate keys at any depth, and (when warn is
// set) invisible or bidirectional Unicode in keys and string values.
type walker struct {
	dec  *json.Decoder
	path []string
	warn func(path, code string)
	// name is the top-level "name" member when it is a string (a tool descriptor's name).
	name    string
	hasName bool
}

// validate refuses raw unless it is exactly one well-formed I-JSON value (see validateWalk).
func validate(raw []byte, warn func(path, code string)) error {
	_, err := validateWalk(raw, warn)
	return err
}

// validateWalk refuses raw unless it is exactly one well-formed I-JSON value. warn, when not nil,
// receives each Unicode finding with its JSON Pointer.
func validateWalk(raw []byte, warn func(path, code string)) (*walker, error) {
	if !utf8.Valid(raw) {
		return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(invalidUTF8Offset(raw))}
	}
	if off, ok := checkSurrogates(raw); !ok {
		return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(off)}
	}
	if !json.Valid(raw) {
		return nil, &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := &walker{dec: dec, warn: warn}
	if err := w.value(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: dec.InputOffset()}
	}
	return w, nil
}

func (w *walker) value() error {
	tok, err := w.dec.Token()
	if err != nil {
		return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return w.object()
		case '[':
			return w.array()
		}
		return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
	case string:
		w.scan(t)
		if len(w.path) == 1 && w.path[0] == "name" {
			w.name, w.hasName = t, true
		}
	}
	return nil
}

func (w *walker) object() error {
	seen := map[string]struct{}{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
		}
		key, ok := tok.(string)
		if !ok {
			return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
		}
		if _, dup := seen[key]; dup {
			return &RefusalError{Name: "duplicate_key", Err: ErrDuplicateKey, Offset: w.dec.InputOffset(), Path: pointer(w.path)}
		}
		seen[key] = struct{}{}
		w.path = append(w.path, key)
		w.scanKey(key)
		if err := w.value(); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	_, err := w.dec.Token() // '}'
	if err != nil {
		return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
	}
	return nil
}

func (w *walker) array() error {
	for i := 0; w.dec.More(); i++ {
		w.path = append(w.path, itoa(i))
		if err := w.value(); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	_, err := w.dec.Token() // ']'
	if err != nil {
		return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: w.dec.InputOffset()}
	}
	return nil
}

func (w *walker) scan(s string) {
	if w.warn == nil {
		return
	}
	for _, code := range unicodeFindings(s) {
		w.warn(pointer(w.path), code)
	}
}

// scanKey reports findings in a member name at the member's own path.
func (w *walker) scanKey(key string) { w.scan(key) }

func itoa(i int) string {
	if i < 10 {
		return "0123456789"[i : i+1]
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
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

// checkSurrogates reports whether every \uD800-\uDFFF escape inside the JSON strings of raw is part
// of a well-formed high/low pair; on failure it returns the offset of the offending escape.
func checkSurrogates(raw []byte) (int, bool) {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(raw) {
				return i, true // malformed; json.Valid reports it
			}
			if raw[i+1] != 'u' {
				i++
				continue
			}
			u, ok := hex4(raw, i+2)
			if !ok {
				return i, true // malformed; json.Valid reports it
			}
			switch {
			case u >= 0xD800 && u <= 0xDBFF:
				if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return i, false
				}
				lo, ok := hex4(raw, i+8)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i, false
				}
				i += 11
			case u >= 0xDC00 && u <= 0xDFFF:
				return i, false
			default:
				i += 5
			}
		}
	}
	return 0, true
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
