package invocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/b10x/connector-mcp/internal/lru"
)

// schemaLocation is the base URL every input schema is compiled under. Relative references
// resolve against it and are then refused by the loader, like every other external reference.
// It is a hierarchical URL on a reserved name (.invalid): with a "urn:" base the library resolves
// a relative reference such as "s.json" to the root schema itself instead of refusing it.
const schemaLocation = "https://input-schema.invalid/schema.json"

// DefaultSchemaCacheSize is the number of compiled input schemas a SchemaCache from
// NewSchemaCache holds before it evicts the least recently used one.
const DefaultSchemaCacheSize = 2048

// SchemaCache holds compiled input schemas keyed by (snapshot digest, remote tool name). A
// frozen snapshot never changes, so each schema is compiled once per snapshot while it stays
// cached, and a failure to compile is remembered too. The cache is a bounded LRU: past its size
// the least recently used schema is evicted and compiled again on its next use (same schema,
// same result). Share one cache across the surfaces of a process: a surface rebuilt for the same
// snapshot reuses the compiled schemas. It is safe for concurrent use.
type SchemaCache struct {
	entries *lru.Cache[schemaKey, *schemaEntry]
	count   atomic.Int64
}

type schemaKey struct{ snapshot, tool string }

type schemaEntry struct {
	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

// NewSchemaCache returns an empty cache of DefaultSchemaCacheSize schemas.
func NewSchemaCache() *SchemaCache { return NewSchemaCacheSize(DefaultSchemaCacheSize) }

// NewSchemaCacheSize returns an empty cache of at most size schemas (size < 1:
// DefaultSchemaCacheSize).
func NewSchemaCacheSize(size int) *SchemaCache {
	if size < 1 {
		size = DefaultSchemaCacheSize
	}
	return &SchemaCache{entries: lru.New[schemaKey, *schemaEntry](size)}
}

// Compilations returns how many schemas this cache has compiled (successfully or not).
func (c *SchemaCache) Compilations() int64 { return c.count.Load() }

// Len returns how many schemas the cache holds.
func (c *SchemaCache) Len() int { return c.entries.Len() }

// Forget drops every schema compiled for snapshotDigest, e.g. once no surface serves it any more.
func (c *SchemaCache) Forget(snapshotDigest string) {
	c.entries.RemoveFunc(func(k schemaKey) bool { return k.snapshot == snapshotDigest })
}

// get returns the compiled input schema of tool in snapshot, compiling raw once while cached.
func (c *SchemaCache) get(snapshotDigest, tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	e, _ := c.entries.GetOrAdd(schemaKey{snapshotDigest, tool}, func() *schemaEntry { return &schemaEntry{} })
	e.once.Do(func() {
		c.count.Add(1)
		e.schema, e.err = compileSchema(raw)
	})
	return e.schema, e.err
}

// refusingLoader loads nothing: an input schema is self-contained. The JSON Schema meta-schemas
// are embedded in the library and never reach a loader. It counts the attempts, since the
// library's load error does not unwrap.
type refusingLoader struct{ attempts int }

func (l *refusingLoader) Load(string) (any, error) {
	l.attempts++
	return nil, ErrRemoteReference
}

// compileSchema compiles one input schema (draft 2020-12 unless it says otherwise, the MCP
// default), with no file or network loading.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
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
		// The library's message may quote the schema; only the sentinel surfaces.
		if loader.attempts > 0 {
			return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, ErrRemoteReference)
		}
		return nil, ErrInvalidSchema
	}
	return s, nil
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
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	if ve.ErrorKind != nil {
		keyword = strings.Join(ve.ErrorKind.KeywordPath(), "/")
	}
	if keyword == "" {
		keyword = "schema"
	}
	return b.String(), keyword
}
