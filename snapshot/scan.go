package snapshot

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// scanner validates one JSON document in a single pass: RFC 8259 grammar, valid UTF-8, paired
// surrogate escapes, unique member names at every depth. When warn is set it reports invisible,
// bidi and control characters in member names and string values with their JSON Pointer. It also
// records the top-level "name" member when it is a string.
type scanner struct {
	data []byte
	pos  int
	warn func(path, code string)
	path []segment
	mode scanMode

	name    string
	hasName bool
}

// scanMode selects what validateWalk refuses beyond the JSON grammar, UTF-8 and unique member
// names.
type scanMode int

const (
	// scanWellFormed admits any JSON number.
	scanWellFormed scanMode = iota
	// scanDigest also refuses numbers whose RFC 8785 form does not determine them (checkNumber):
	// the mode of every document that is canonicalized or digested.
	scanDigest
)

// segment is one step of the current JSON Pointer: a member name or an array index.
type segment struct {
	key   string
	index int
	isKey bool
}

// validateWalk refuses raw unless it is exactly one well-formed I-JSON value (and, in scanDigest
// mode, every number is safe to canonicalize). On a refusal after the scan started, the scanner
// is returned too: its top-level "name", when already read, names the tool in the refusal.
func validateWalk(raw []byte, mode scanMode, warn func(path, code string)) (*scanner, error) {
	if !utf8.Valid(raw) {
		return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(invalidUTF8Offset(raw))}
	}
	s := &scanner{data: raw, warn: warn, mode: mode}
	s.ws()
	if err := s.value(0); err != nil {
		return s, err
	}
	s.ws()
	if s.pos != len(s.data) {
		return s, s.invalid()
	}
	return s, nil
}

func (s *scanner) invalid() error {
	return &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: int64(s.pos)}
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if s.pos >= len(s.data) || depth > maxDepth {
		return s.invalid()
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		str, err := s.str()
		if err != nil {
			return err
		}
		s.findings(str)
		if len(s.path) == 1 && s.path[0].isKey && s.path[0].key == "name" {
			s.name, s.hasName = string(str), true
		}
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.invalid()
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.invalid()
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) object(depth int) error {
	s.pos++ // '{'
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	var small [][]byte
	var large map[string]struct{}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.invalid()
		}
		keyAt := s.pos
		key, err := s.str()
		if err != nil {
			return err
		}
		dup := false
		if large != nil {
			_, dup = large[string(key)]
			large[string(key)] = struct{}{}
		} else {
			for _, k := range small {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			small = append(small, key)
			if len(small) > 16 {
				large = make(map[string]struct{}, 32)
				for _, k := range small {
					large[string(k)] = struct{}{}
				}
			}
		}
		if dup {
			return &RefusalError{Name: "duplicate_key", Err: ErrDuplicateKey, Offset: int64(keyAt), Path: s.pointer()}
		}
		s.path = append(s.path, segment{key: string(key), isKey: true})
		s.findings(key)
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.invalid()
		}
		s.pos++
		s.ws()
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.pos >= len(s.data) {
			return s.invalid()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			return nil
		default:
			return s.invalid()
		}
	}
}

func (s *scanner) array(depth int) error {
	s.pos++ // '['
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.path = append(s.path, segment{index: i})
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.pos >= len(s.data) {
			return s.invalid()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			return nil
		default:
			return s.invalid()
		}
	}
}

// str reads a string starting at '"' and returns its decoded bytes (a sub-slice of the input
// when it has no escapes).
func (s *scanner) str() ([]byte, error) {
	s.pos++ // '"'
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			out := s.data[start:s.pos]
			s.pos++
			return out, nil
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return nil, s.invalid()
		}
		s.pos++
	}
	return nil, s.invalid()
}

// escaped continues str from the first backslash, decoding into a new buffer.
func (s *scanner) escaped(start int) ([]byte, error) {
	out := append([]byte(nil), s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return out, nil
		case c < 0x20:
			return nil, s.invalid()
		case c != '\\':
			out = append(out, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			return nil, s.invalid()
		}
		esc := s.data[s.pos+1]
		s.pos += 2
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			at := s.pos - 2
			r, ok := hex4(s.data, s.pos)
			if !ok {
				return nil, s.invalid()
			}
			s.pos += 4
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if s.pos+1 >= len(s.data) || s.data[s.pos] != '\\' || s.data[s.pos+1] != 'u' {
					return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(at)}
				}
				lo, ok := hex4(s.data, s.pos+2)
				if !ok {
					return nil, s.invalid()
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(at)}
				}
				s.pos += 6
				r = utf16.DecodeRune(r, lo)
			case r >= 0xDC00 && r <= 0xDFFF:
				return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(at)}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.invalid()
		}
	}
	return nil, s.invalid()
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos >= len(s.data) {
		return s.invalid()
	}
	if s.data[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return s.invalid()
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.invalid()
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.invalid()
		}
	}
	if s.mode == scanDigest && !checkNumber(s.data[start:s.pos]) {
		return &RefusalError{Name: "unsafe_number", Err: ErrUnsafeNumber, Offset: int64(start), Path: s.pointer()}
	}
	return nil
}

// findings reports the Unicode findings of one decoded string at the current path.
func (s *scanner) findings(str []byte) {
	if s.warn == nil {
		return
	}
	plain := true
	for _, c := range str {
		if c >= 0x80 || c < 0x20 || c == 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return
	}
	for _, code := range unicodeFindings(string(str)) {
		s.warn(s.pointer(), code)
	}
}

// pointer renders the current path as an RFC 6901 JSON Pointer.
func (s *scanner) pointer() string {
	parts := make([]string, len(s.path))
	for i, seg := range s.path {
		if seg.isKey {
			parts[i] = seg.key
		} else {
			parts[i] = strconv.Itoa(seg.index)
		}
	}
	return pointer(parts)
}
