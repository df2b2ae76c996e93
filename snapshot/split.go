package snapshot

import "encoding/json"

// Member is one member of a JSON object, as returned by Members.
type Member struct {
	// Name is the member name, decoded, matched byte for byte (no case folding).
	Name string
	// Value is the member's value exactly as received: a sub-slice of the input, not a copy.
	Value json.RawMessage
}

// Members checks raw as Validate does (one well-formed value, valid UTF-8, paired surrogate
// escapes, unique member names at every depth, any number) and, in the same pass, returns the
// members of its top-level object in document order. A valid document that is not an object is
// refused "invalid_json" (ErrInvalidJSON). Errors are *RefusalError values carrying no document
// text.
func Members(raw []byte) ([]Member, error) {
	s, err := splitTop(raw, '{')
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(s.top))
	for i, sp := range s.top {
		out[i] = Member{Name: string(sp.key), Value: raw[sp.start:sp.end:sp.end]}
	}
	return out, nil
}

// splitTop validates raw (scanWellFormed), recording the spans of its top-level object's members,
// and requires the top-level value to open with open.
func splitTop(raw []byte, open byte) (*scanner, error) {
	s := &scanner{spans: true}
	if err := s.run(raw, scanWellFormed, nil); err != nil {
		return nil, err
	}
	if i := firstNonSpace(raw); i < 0 || raw[i] != open {
		return nil, &RefusalError{Name: RefusalInvalidJSON, Err: ErrInvalidJSON}
	}
	return s, nil
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
