package snapshot

import (
	k8sjson "sigs.k8s.io/json"
)

// Unmarshal decodes one untrusted JSON document (from a server, a registry or a caller) into v.
//
// It refuses what Validate refuses (invalid UTF-8, unpaired surrogate escapes, duplicate member
// names at any depth, malformed JSON, trailing data) and then decodes with exact-case member
// matching: a member binds a struct field only when its name is the field's JSON name byte for
// byte. encoding/json also binds case variants ("InputSchema", "INPUTSCHEMA" to "inputSchema"),
// letting the last of them win, so one document could carry two values for one field: the one
// this package, go-sdk and a schema validator read, and the one encoding/json picks. Here case
// variants are unknown members and are ignored, like any other unknown member.
//
// Numbers decoded into an interface value become int64 when they are integers that fit, float64
// otherwise. Errors are *RefusalError values carrying no document text: the scanner's refusal,
// or "invalid_json" (ErrInvalidJSON) when a value does not fit its field's type.
func Unmarshal(data []byte, v any) error {
	if err := validate(data, scanWellFormed, nil); err != nil {
		return err
	}
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(data, v); err != nil {
		return &RefusalError{Name: RefusalInvalidJSON, Err: ErrInvalidJSON}
	}
	return nil
}
