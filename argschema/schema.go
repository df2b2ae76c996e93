// Package argschema checks the arguments of one tool call against the tool's frozen input schema,
// the way every consumer of connector-mcp does (the operator's invocation surface, package
// admission, mcpctl serve): the schema compiles with santhosh-tekuri/jsonschema v6 (draft 2020-12
// unless it says otherwise, the MCP default) and never loads anything (no file, no network: an
// external reference is refused); arguments must be one JSON object with no duplicate keys,
// invalid UTF-8, trailing data, or member names equal under case folding, and must validate.
//
// Failures are sentinels and a *Violation that names where (a JSON Pointer) and which keyword
// failed; values from the arguments or the schema library's messages never surface.
//
// The package is pure: it does no I/O and depends on no MCP or Kubernetes library.
package argschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/b10x/connector-mcp/snapshot"
)

// schemaLocation is the base URL every input schema is compiled under. Relative references
// resolve against it and are then refused by the loader, like every other external reference.
// It is a hierarchical URL on a reserved name (.invalid): with a "urn:" base the library resolves
// a relative reference such as "s.json" to the root schema itself instead of refusing it.
const schemaLocation = "https://input-schema.invalid/schema.json"

// RefusalInvalidArguments is the stable refusal name of a *Violation.
const RefusalInvalidArguments = "invalid_arguments"

var (
	// ErrInvalidSchema means the frozen input schema does not compile.
	ErrInvalidSchema = errors.New("invalid input schema")
	// ErrRemoteReference means the input schema refers to a resource outside itself; nothing is
	// ever loaded.
	ErrRemoteReference = errors.New("input schema refers to an external resource")
	// ErrInvalidArguments means the arguments are not a JSON object or violate the input schema.
	ErrInvalidArguments = errors.New("invalid arguments")
)

// Violation is the refusal of arguments: Pointer is the RFC 6901 JSON Pointer of the failing
// instance (empty for the whole value) and Keyword the schema keyword path that failed ("" when
// the arguments are not one well-formed JSON object; KeywordAmbiguousKeys for case-folded
// duplicates). It never carries values.
type Violation struct {
	// Pointer locates the failing instance inside the arguments.
	Pointer string
	// Keyword is the failing schema keyword path, e.g. "required" or "properties/n/maximum".
	Keyword string
}

// Error names the location and keyword, never values.
func (v *Violation) Error() string {
	if v.Keyword == "" {
		return RefusalInvalidArguments + ": not one JSON object"
	}
	return fmt.Sprintf("%s: %q fails %q", RefusalInvalidArguments, v.Pointer, v.Keyword)
}

// Refusal returns RefusalInvalidArguments.
func (v *Violation) Refusal() string { return RefusalInvalidArguments }

// Unwrap returns ErrInvalidArguments.
func (v *Violation) Unwrap() error { return ErrInvalidArguments }

// Schema is one compiled input schema. It is immutable and safe for concurrent use.
type Schema struct{ s *jsonschema.Schema }

// refusingLoader loads nothing: an input schema is self-contained. The JSON Schema meta-schemas
// are embedded in the library and never reach a loader. It counts the attempts, since the
// library's load error does not unwrap.
type refusingLoader struct{ attempts int }

func (l *refusingLoader) Load(string) (any, error) {
	l.attempts++
	return nil, ErrRemoteReference
}

// Compile compiles one input schema (draft 2020-12 unless it says otherwise, the MCP default),
// with no file or network loading. A failure is ErrInvalidSchema (wrapping ErrRemoteReference
// when the schema refers outside itself) and nothing else: the library's message may quote the
// schema.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, ErrInvalidSchema
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, ErrInvalidSchema
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, ErrInvalidSchema
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	loader := &refusingLoader{}
	c.UseLoader(loader)
	if err := c.AddResource(schemaLocation, doc); err != nil {
		return nil, ErrInvalidSchema
	}
	s, err := c.Compile(schemaLocation)
	if err != nil {
		if loader.attempts > 0 {
			return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, ErrRemoteReference)
		}
		return nil, ErrInvalidSchema
	}
	return &Schema{s: s}, nil
}

// Check validates raw, the arguments of one call (empty means {}), and returns the arguments to
// send: raw with surrounding whitespace trimmed, byte for byte otherwise. Duplicate keys, invalid
// UTF-8 and trailing data are refused before the schema sees the value (a validator and the
// server could otherwise read two different objects), then member names equal under case folding
// at any level, then the schema itself. Every refusal is a *Violation.
func (s *Schema) Check(raw json.RawMessage) (json.RawMessage, error) {
	args := bytes.TrimSpace(raw)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if args[0] != '{' || snapshot.Validate(args) != nil {
		return nil, &Violation{}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, &Violation{}
	}
	if ptr, ambiguous := ambiguousKeys(v); ambiguous {
		return nil, &Violation{Pointer: ptr, Keyword: KeywordAmbiguousKeys}
	}
	if err := s.s.Validate(v); err != nil {
		ptr, kw := validationFailure(err)
		return nil, &Violation{Pointer: ptr, Keyword: kw}
	}
	return args, nil
}

// validationFailure reduces a validation error to the first leaf failure: the JSON Pointer of
// the instance location and the keyword path. Values are never taken from the error.
func validationFailure(err error) (pointer, keyword string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "", "schema"
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	var b strings.Builder
	for _, tok := range ve.InstanceLocation {
		b.WriteByte('/')
		b.WriteString(escapePointer(tok))
	}
	if ve.ErrorKind != nil {
		keyword = strings.Join(ve.ErrorKind.KeywordPath(), "/")
	}
	if keyword == "" {
		keyword = "schema"
	}
	return b.String(), keyword
}
