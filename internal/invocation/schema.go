package invocation

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/b10x/connector-mcp/argschema"
	"github.com/b10x/connector-mcp/internal/lru"
)

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
	schema *argschema.Schema
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
func (c *SchemaCache) get(snapshotDigest, tool string, raw json.RawMessage) (*argschema.Schema, error) {
	e, _ := c.entries.GetOrAdd(schemaKey{snapshotDigest, tool}, func() *schemaEntry { return &schemaEntry{} })
	e.once.Do(func() {
		c.count.Add(1)
		e.schema, e.err = compileSchema(raw)
	})
	return e.schema, e.err
}

// compileSchema compiles one input schema with argschema.Compile (the shared rules: draft
// 2020-12 by default, nothing ever loaded).
func compileSchema(raw json.RawMessage) (*argschema.Schema, error) { return argschema.Compile(raw) }
