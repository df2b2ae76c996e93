package snapshot

import (
	"encoding/json"
	"sync"
)

// Member is one member of a JSON object, as returned by Members.
type Member struct {
	// Name is the member name, decoded, matched byte for byte (no case folding).
	Name string
	// Value is the member's value exactly as received: a sub-slice of the input, not a copy.
	Value json.RawMessage
	// Offset is where Value starts in the input.
	Offset int
}

// Members checks raw as Validate does (one well-formed value, valid UTF-8, paired surrogate
// escapes, unique member names at every depth, any number) and, in the same pass, returns the
// members of its top-level object in document order. A valid document that is not an object is
// refused "invalid_json" (ErrInvalidJSON). Errors are *RefusalError values carrying no document
// text.
func Members(raw []byte) ([]Member, error) {
	s, err := splitTop(raw, '{', "")
	defer releaseSplitter(s)
	if err != nil {
		return nil, err
	}
	return s.topMembers(raw), nil
}

// MembersAndElements is Members that also returns, in the same pass, the elements of the array
// that is the value of the top-level member named array (matched byte for byte after decoding):
// each exactly as received (a sub-slice of raw), in document order; empty, not nil, for []; nil
// when no member has that name or its value is not an array. The elements are checked as the
// rest of the document is, so a list is read in one strict pass.
func MembersAndElements(raw []byte, array string) ([]Member, []json.RawMessage, error) {
	s, err := splitTop(raw, '{', array)
	defer releaseSplitter(s)
	if err != nil {
		return nil, nil, err
	}
	var elems []json.RawMessage
	if s.elemsSeen {
		elems = make([]json.RawMessage, len(s.elems))
		for i, sp := range s.elems {
			elems[i] = raw[sp.start:sp.end:sp.end]
		}
	}
	return s.topMembers(raw), elems, nil
}

// topMembers returns the members of the top-level object a spans scan of raw recorded.
func (s *scanner) topMembers(raw []byte) []Member {
	out := make([]Member, len(s.top))
	for i, sp := range s.top {
		out[i] = Member{Name: string(sp.key), Value: raw[sp.start:sp.end:sp.end], Offset: sp.start}
	}
	return out
}

// splitTop validates raw (scanWellFormed), recording the spans of its top-level object's members
// (and, when array is not empty, the elements of the array value of the member so named), and
// requires the top-level value to open with open.
// The scanner it returns comes from a pool: the caller copies out what it needs and gives it
// back with releaseSplitter (also on an error).
func splitTop(raw []byte, open byte, array string) (*scanner, error) {
	s := splitters.Get().(*scanner)
	s.spans = true
	if array != "" {
		s.elemsOf = []byte(array)
	}
	if err := s.run(raw, scanWellFormed, nil); err != nil {
		return s, err
	}
	if i := firstNonSpace(raw); i < 0 || raw[i] != open {
		return s, &RefusalError{Name: RefusalInvalidJSON, Err: ErrInvalidJSON}
	}
	return s, nil
}

// splitters are the scanners of splitTop, reused: a document's split then allocates only what
// it returns, not the scan's stacks.
var splitters = sync.Pool{New: func() any { return new(scanner) }}

// maxPooledSplitterMembers bounds the stacks a scanner may keep in the pool: one huge document
// does not pin its scratch space.
const maxPooledSplitterMembers = 1024

// releaseSplitter resets s and returns it to the pool.
func releaseSplitter(s *scanner) {
	if cap(s.members) > maxPooledSplitterMembers || cap(s.top) > maxPooledSplitterMembers || cap(s.elems) > maxPooledSplitterMembers || cap(s.path) > maxPooledSplitterMembers {
		return
	}
	s.reset()
	splitters.Put(s)
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return -1
}
