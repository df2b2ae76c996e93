package argschema

import (
	"errors"
	"testing"
)

// FuzzCompileSchema: whatever the frozen input schema holds, compiling it never loads anything,
// and a failure is only ever this package's sentinel (never the library's message, which may
// quote the schema).
func FuzzCompileSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"number"}}}`))
	f.Add([]byte(`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`))
	f.Add([]byte(`{"$id":"http://h/","$ref":"other.json"}`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`))
	f.Add([]byte(`{"$schema":"file:///etc/passwd"}`))
	f.Add([]byte(`{"type":"object","pattern":"(a"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Compile(raw)
		switch {
		case err == nil && s == nil:
			t.Fatal("no schema and no error")
		case err != nil && !errors.Is(err, ErrInvalidSchema):
			t.Fatalf("foreign error: %v", err)
		case err != nil && err.Error() != ErrInvalidSchema.Error() &&
			err.Error() != ErrInvalidSchema.Error()+": "+ErrRemoteReference.Error():
			t.Fatalf("error text beyond the sentinels: %q", err)
		}
	})
}
