package snapshot

import (
	"bytes"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
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
	// collect, when set, makes the scan append each Unicode finding to found (without the tool
	// name) instead of calling warn: no closure per document.
	collect bool
	found   []Warning
	path    []segment
	mode    scanMode

	name    string
	hasName bool

	// simple reports that the string str last read had no escape and only printable ASCII.
	simple bool
	// discard, set around one str call, makes it check an escaped string without decoding it
	// into a new buffer: the bytes it returns are then not the string's. tiny is the scratch
	// space of that check (one decoded escape at a time).
	discard bool
	tiny    [8]byte
	// esc reports that the string str last read had an escape (its bytes are a new buffer, not
	// a sub-slice of data).
	esc bool
	// keys holds the decoded bytes of escaped member names, referenced by keyRef offsets: the
	// path and member stacks hold no pointers, so pushing onto them needs no GC write barrier.
	keys []byte

	// canon, when set (scanDigest only), makes the scan also write the RFC 8785 canonical form
	// of the document to out, so a digest needs no second parse.
	canon bool
	out   []byte
	// members is a stack of the member names and canonical spans of the objects being scanned;
	// each object uses the entries above its base and truncates them when it ends.
	members []member
	// spans, when set, makes the scan record the members of the top-level object in top.
	spans bool
	top   []span
	// elemsOf, when set (with spans), names the top-level member whose array value's elements
	// the scan records in elems; inElems is set while that member's value is scanned, and
	// elemsSeen once its value turned out to be an array.
	elemsOf   []byte
	inElems   bool
	elemsSeen bool
	elems     []span
	// region and order are sortMembers' scratch space, reused.
	region []byte
	order  []int
}

// keyRef locates a decoded member name without a pointer: data[start:end], or keys[start:end]
// when the name had an escape.
type keyRef struct {
	start, end int
	esc        bool
}

// key returns the bytes r refers to.
func (s *scanner) key(r keyRef) []byte {
	if r.esc {
		return s.keys[r.start:r.end]
	}
	return s.data[r.start:r.end]
}

// span is one member of the top-level object: its name and the offsets of its value in the
// input.
type span struct {
	key        []byte
	start, end int
}

// member is one object member: its decoded name and, when canonicalizing, the span of its
// canonical "name":value text in out.
type member struct {
	key        keyRef
	start, end int
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
	key   keyRef
	index int
	isKey bool
}

// validateWalk refuses raw unless it is exactly one well-formed I-JSON value (and, in scanDigest
// mode, every number is safe to canonicalize). On a refusal after the scan started, the scanner
// is returned too: its top-level "name", when already read, names the tool in the refusal.
func validateWalk(raw []byte, mode scanMode, warn func(path, code string)) (*scanner, error) {
	s := &scanner{}
	return s, s.run(raw, mode, warn)
}

// canonicalWalk is validateWalk in scanDigest mode that also appends the RFC 8785 canonical form
// of raw to out, in the same pass. The scanner returned holds the canonical bytes in s.out.
func canonicalWalk(raw []byte, out []byte, warn func(path, code string)) (*scanner, error) {
	s := &scanner{}
	return s, s.canonical(raw, out, warn)
}

// canonical resets s (keeping its scratch space) and runs canonicalWalk's scan with it.
func (s *scanner) canonical(raw []byte, out []byte, warn func(path, code string)) error {
	s.reset()
	s.canon, s.out = true, out
	return s.run(raw, scanDigest, warn)
}

// reset clears s for a new document, keeping its scratch space (and collect).
// reset makes s ready for another scan, keeping its scratch space.
func (s *scanner) reset() {
	s.data, s.pos, s.warn = nil, 0, nil
	s.path, s.members, s.region, s.order, s.keys = s.path[:0], s.members[:0], s.region[:0], s.order[:0], s.keys[:0]
	s.found = s.found[:0]
	s.name, s.hasName, s.simple, s.esc = "", false, false, false
	// The spans' names may point into the last document: cleared, so a reused scanner keeps
	// nothing of it.
	clear(s.top)
	s.canon, s.out, s.spans, s.top = false, nil, false, s.top[:0]
	s.elemsOf, s.inElems, s.elemsSeen, s.elems = nil, false, false, s.elems[:0]
}

// run scans raw with the scanner's settings.
func (s *scanner) run(raw []byte, mode scanMode, warn func(path, code string)) error {
	if !utf8.Valid(raw) {
		return &RefusalError{Name: RefusalInvalidUTF8, Err: ErrInvalidUTF8, Offset: int64(invalidUTF8Offset(raw))}
	}
	s.data, s.warn, s.mode = raw, warn, mode
	s.canon = s.canon && mode == scanDigest
	s.ws()
	if err := s.value(0); err != nil {
		return err
	}
	s.ws()
	if s.pos != len(s.data) {
		return s.invalid()
	}
	return nil
}

func (s *scanner) invalid() error {
	return &RefusalError{Name: RefusalInvalidJSON, Err: ErrInvalidJSON, Offset: int64(s.pos)}
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
		// A string value whose decoded bytes nothing reads (no findings, no canonical form, not
		// a top-level "name") is checked without being decoded into a new buffer.
		s.discard = !s.canon && s.warn == nil && !s.collect &&
			(len(s.path) != 1 || !s.path[0].isKey || string(s.key(s.path[0].key)) != "name")
		str, err := s.str()
		s.discard = false
		if err != nil {
			return err
		}
		s.findings(str)
		if len(s.path) == 1 && s.path[0].isKey && string(s.key(s.path[0].key)) == "name" {
			s.name, s.hasName = string(str), true
		}
		if s.canon {
			s.out = s.appendString(str)
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
	if s.canon {
		s.out = append(s.out, lit...)
	}
	return nil
}

func (s *scanner) object(depth int) error {
	s.pos++ // '{'
	s.ws()
	if s.canon {
		s.out = append(s.out, '{')
	}
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		if s.canon {
			s.out = append(s.out, '}')
		}
		return nil
	}
	base := len(s.members)
	defer func() { s.members = s.members[:base] }()
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
		ref := keyRef{start: keyAt + 1, end: keyAt + 1 + len(key)}
		if s.esc {
			ref = keyRef{start: len(s.keys), esc: true}
			s.keys = append(s.keys, key...)
			ref.end = len(s.keys)
		}
		dup := false
		if large != nil {
			_, dup = large[string(key)]
			large[string(key)] = struct{}{}
		} else {
			for _, m := range s.members[base:] {
				if bytes.Equal(s.key(m.key), key) {
					dup = true
					break
				}
			}
			if len(s.members)-base >= 16 {
				large = make(map[string]struct{}, 32)
				for _, m := range s.members[base:] {
					large[string(s.key(m.key))] = struct{}{}
				}
				large[string(key)] = struct{}{}
			}
		}
		if dup {
			return &RefusalError{Name: RefusalDuplicateKey, Err: ErrDuplicateKey, Offset: int64(keyAt), Path: s.pointer()}
		}
		start := len(s.out)
		if s.canon {
			if len(s.members) > base {
				s.out = append(s.out, ',')
				start++
			}
			s.out = s.appendString(key)
			s.out = append(s.out, ':')
		}
		s.path = append(s.path, segment{key: ref, isKey: true})
		s.findings(key)
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.invalid()
		}
		s.pos++
		s.ws()
		valueAt := s.pos
		s.inElems = s.elemsOf != nil && depth == 1 && bytes.Equal(key, s.elemsOf)
		if err := s.value(depth); err != nil {
			return err
		}
		s.inElems = false
		if s.spans && depth == 1 {
			s.top = append(s.top, span{key: key, start: valueAt, end: s.pos})
		}
		s.path = s.path[:len(s.path)-1]
		s.members = append(s.members, member{key: ref, start: start, end: len(s.out)})
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
			if s.canon {
				s.sortMembers(s.members[base:])
				s.out = append(s.out, '}')
			}
			return nil
		default:
			return s.invalid()
		}
	}
}

// sortMembers rewrites the canonical members of one object (contiguous in out, in wire order,
// separated by commas) in RFC 8785 order: by member name as UTF-16 code units.
func (s *scanner) sortMembers(ms []member) {
	sorted := true
	for i := 1; i < len(ms); i++ {
		if !lessUTF16(s.key(ms[i-1].key), s.key(ms[i].key)) {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	from, to := ms[0].start, ms[len(ms)-1].end
	s.region = append(s.region[:0], s.out[from:to]...)
	region := s.region
	// Indices, not members, are sorted: moving an int needs no GC write barrier.
	order := s.order[:0]
	for i := range ms {
		order = append(order, i)
	}
	s.order = order
	if len(order) <= 12 {
		// Insertion sort: objects are small (names are unique: duplicates were refused).
		for i := 1; i < len(order); i++ {
			k := order[i]
			key := s.key(ms[k].key)
			j := i
			for ; j > 0 && lessUTF16(key, s.key(ms[order[j-1]].key)); j-- {
				order[j] = order[j-1]
			}
			order[j] = k
		}
	} else {
		slices.SortFunc(order, func(a, b int) int {
			if lessUTF16(s.key(ms[a].key), s.key(ms[b].key)) {
				return -1
			}
			return 1 // names are unique: duplicates were refused
		})
	}
	out := s.out[:from]
	for i, k := range order {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, region[ms[k].start-from:ms[k].end-from]...)
	}
	s.out = out
}

// lessUTF16 reports whether member name a sorts before b by UTF-16 code units (RFC 8785
// section 3.2.3). Both are valid UTF-8. UTF-8 byte order is code point order, which differs from
// UTF-16 order only between a supplementary character (a surrogate pair, 0xD800-0xDBFF first)
// and a BMP character at or above U+E000.
func lessUTF16(a, b []byte) bool {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) < len(b)
	}
	if a[i] < 0x80 || b[i] < 0x80 {
		// An ASCII byte after an equal prefix starts a character in both names; ASCII sorts
		// below every other character in both orders.
		return a[i] < b[i]
	}
	for i > 0 && a[i]&0xC0 == 0x80 { // back to the start of the differing character
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	return utf16Key(ra) < utf16Key(rb)
}

// utf16Key orders a code point as its first UTF-16 code unit would, keeping code point order
// among characters that share that unit's class.
func utf16Key(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r - 0x10000) // below every BMP character at or above U+E000
	}
	if r >= 0xE000 {
		return r + 0x100000 // above every supplementary character
	}
	return r
}

func (s *scanner) array(depth int) error {
	s.pos++ // '['
	s.ws()
	if s.canon {
		s.out = append(s.out, '[')
	}
	// The elements of the array named by elemsOf (the value of a top-level member) are recorded.
	rec := s.inElems && depth == 2
	s.elemsSeen = s.elemsSeen || rec
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		if s.canon {
			s.out = append(s.out, ']')
		}
		return nil
	}
	for i := 0; ; i++ {
		if s.canon && i > 0 {
			s.out = append(s.out, ',')
		}
		s.path = append(s.path, segment{index: i})
		at := s.pos
		if err := s.value(depth); err != nil {
			return err
		}
		if rec {
			s.elems = append(s.elems, span{start: at, end: s.pos})
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
			if s.canon {
				s.out = append(s.out, ']')
			}
			return nil
		default:
			return s.invalid()
		}
	}
}

// str reads a string starting at '"' and returns its decoded bytes (a sub-slice of the input
// when it has no escapes).
//
// It sets s.simple when the string had no escape and only printable ASCII (0x20-0x7e): such a
// string has no Unicode finding and is its own RFC 8785 form.
func (s *scanner) str() ([]byte, error) {
	s.simple, s.esc = false, false
	data, pos := s.data, s.pos+1 // after '"'; locals, so the loop keeps them in registers
	start := pos
	ascii := true
	for pos < len(data) {
		c := data[pos]
		if plainByte[c] {
			pos++
			continue
		}
		switch {
		case c == '"':
			s.pos = pos + 1
			s.simple = ascii
			return data[start:pos], nil
		case c == '\\':
			s.pos = pos
			return s.escaped(start)
		case c < 0x20:
			s.pos = pos
			return nil, s.invalid()
		}
		ascii = false // DEL or a byte of a multi-byte character
		pos++
	}
	s.pos = pos
	return nil, s.invalid()
}

// plainByte marks the bytes a string holds as themselves with no finding: printable ASCII other
// than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escaped continues str from the first backslash, decoding into a new buffer (when discard is
// set, checking the escapes only: each is decoded into tiny and dropped).
func (s *scanner) escaped(start int) ([]byte, error) {
	s.esc = true
	keep := !s.discard
	var out []byte
	if keep {
		out = append([]byte(nil), s.data[start:s.pos]...)
	}
	for s.pos < len(s.data) {
		if !keep {
			out = s.tiny[:0]
		}
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
					return nil, &RefusalError{Name: RefusalInvalidUTF8, Err: ErrInvalidUTF8, Offset: int64(at)}
				}
				lo, ok := hex4(s.data, s.pos+2)
				if !ok {
					return nil, s.invalid()
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return nil, &RefusalError{Name: RefusalInvalidUTF8, Err: ErrInvalidUTF8, Offset: int64(at)}
				}
				s.pos += 6
				r = utf16.DecodeRune(r, lo)
			case r >= 0xDC00 && r <= 0xDFFF:
				return nil, &RefusalError{Name: RefusalInvalidUTF8, Err: ErrInvalidUTF8, Offset: int64(at)}
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
		return &RefusalError{Name: RefusalUnsafeNumber, Err: ErrUnsafeNumber, Offset: int64(start), Path: s.pointer()}
	}
	if s.canon {
		out, err := appendCanonicalNumber(s.out, s.data[start:s.pos])
		if err != nil {
			return &RefusalError{Name: RefusalUnsafeNumber, Err: ErrUnsafeNumber, Offset: int64(start), Path: s.pointer()}
		}
		s.out = out
	}
	return nil
}

// appendCanonicalNumber appends the RFC 8785 form of a number literal that checkNumber accepted:
// an integer literal within ±(2^53-1) (no leading zeros, not negative zero) is already its own
// shortest ECMAScript form; any other literal is read as a double and written by the reference
// ECMAScript number serializer.
func appendCanonicalNumber(out, lit []byte) ([]byte, error) {
	plain := true
	for _, c := range lit {
		if c == '.' || c == 'e' || c == 'E' {
			plain = false
			break
		}
	}
	if plain {
		return append(out, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, err
	}
	str, err := jsoncanonicalizer.NumberToJSON(f)
	if err != nil {
		return nil, err
	}
	return append(out, str...), nil
}

// appendString appends the RFC 8785 form of the string str just read to s.out.
func (s *scanner) appendString(str []byte) []byte {
	if s.simple {
		out := append(s.out, '"')
		out = append(out, str...)
		return append(out, '"')
	}
	return appendCanonicalString(s.out, str)
}

// appendCanonicalString appends s (decoded, valid UTF-8) as an RFC 8785 string: '"' and '\\'
// escaped, the short escapes for \b \t \n \f \r, \u00xx (lowercase hex) for other control
// characters, everything else literal.
func appendCanonicalString[T string | []byte](out []byte, s T) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\t':
			out = append(out, '\\', 't')
		case '\n':
			out = append(out, '\\', 'n')
		case '\f':
			out = append(out, '\\', 'f')
		case '\r':
			out = append(out, '\\', 'r')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// findings reports the Unicode findings of one decoded string at the current path.
func (s *scanner) findings(str []byte) {
	if (s.warn == nil && !s.collect) || s.simple {
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
		if s.collect {
			s.found = append(s.found, Warning{Path: s.pointer(), Code: code})
		} else {
			s.warn(s.pointer(), code)
		}
	}
}

// pointer renders the current path as an RFC 6901 JSON Pointer.
func (s *scanner) pointer() string {
	parts := make([]string, len(s.path))
	for i, seg := range s.path {
		if seg.isKey {
			parts[i] = string(s.key(seg.key))
		} else {
			parts[i] = strconv.Itoa(seg.index)
		}
	}
	return pointer(parts)
}
