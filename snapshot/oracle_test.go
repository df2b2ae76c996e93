package snapshot

// The previous validator (encoding/json token walk), kept as an independent oracle for
// FuzzScannerMatchesOracle.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// oracleWalker checks a JSON document token by token: duplicate keys at any depth, and (when warn is
// set) invisible or bidirectional Unicode in keys and string values.
type oracleWalker struct {
	dec  *json.Decoder
	path []string
	warn func(path, code string)
	// name is the top-level "name" member when it is a string (a tool descriptor's name).
	name    string
	hasName bool
}

// oracleValidateWalk refuses raw unless it is exactly one well-formed I-JSON value. warn, when not nil,
// receives each Unicode finding with its JSON Pointer.
func oracleValidateWalk(raw []byte, warn func(path, code string)) (*oracleWalker, error) {
	if !utf8.Valid(raw) {
		return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(invalidUTF8Offset(raw))}
	}
	if off, ok := oracleCheckSurrogates(raw); !ok {
		return nil, &RefusalError{Name: "invalid_utf8", Err: ErrInvalidUTF8, Offset: int64(off)}
	}
	if !json.Valid(raw) {
		return nil, &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := &oracleWalker{dec: dec, warn: warn}
	if err := w.value(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &RefusalError{Name: "invalid_json", Err: ErrInvalidJSON, Offset: dec.InputOffset()}
	}
	return w, nil
}

func (w *oracleWalker) value() error {
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

func (w *oracleWalker) object() error {
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

func (w *oracleWalker) array() error {
	for i := 0; w.dec.More(); i++ {
		w.path = append(w.path, oracleItoa(i))
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

func (w *oracleWalker) scan(s string) {
	if w.warn == nil {
		return
	}
	for _, code := range unicodeFindings(s) {
		w.warn(pointer(w.path), code)
	}
}

// scanKey reports findings in a member name at the member's own path.
func (w *oracleWalker) scanKey(key string) { w.scan(key) }

func oracleItoa(i int) string {
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

// oracleCheckSurrogates reports whether every \uD800-\uDFFF escape inside the JSON strings of raw is part
// of a well-formed high/low pair; on failure it returns the offset of the offending escape.
func oracleCheckSurrogates(raw []byte) (int, bool) {
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
