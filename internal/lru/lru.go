// Package lru bounds the process-lifetime memos of this module (the resolver memo, mcpclient's
// negotiated-era cache, invocation's compiled-schema cache, the gateway's token, authorization
// and rate-limit caches) so that a stream of distinct keys cannot grow memory without limit. The
// cache itself is github.com/hashicorp/golang-lru/v2; this package adds what its callers share
// on top of it: an atomic get-or-create, removal by key predicate, the bound and an eviction
// count.
package lru

import (
	"sync/atomic"

	golru "github.com/hashicorp/golang-lru/v2"
)

// Cache maps keys to values, holding at most Size entries; adding to a full cache evicts the
// least recently used entry. Get and GetOrAdd count as uses. It is safe for concurrent use. The
// zero value is not usable: use New.
type Cache[K comparable, V any] struct {
	c         *golru.Cache[K, V]
	size      int
	evictions atomic.Uint64
}

// New returns an empty cache holding at most size entries (size < 1 is taken as 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	if size < 1 {
		size = 1
	}
	c, err := golru.New[K, V](size)
	if err != nil { // golang-lru refuses only a size below 1
		panic("lru: " + err.Error())
	}
	return &Cache[K, V]{c: c, size: size}
}

// Size returns the bound the cache was created with.
func (c *Cache[K, V]) Size() int { return c.size }

// Get returns the value for key and marks it most recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) { return c.c.Get(key) }

// Add sets the value for key, marking it most recently used, and evicts the least recently used
// entry when the cache is over its bound.
func (c *Cache[K, V]) Add(key K, value V) {
	if c.c.Add(key, value) {
		c.evictions.Add(1)
	}
}

// GetOrAdd returns the value for key; when there is none it stores and returns newValue().
// Concurrent callers for one missing key may each call newValue, but all of them get the one
// value stored. loaded reports whether the value was already there.
func (c *Cache[K, V]) GetOrAdd(key K, newValue func() V) (value V, loaded bool) {
	if v, ok := c.c.Get(key); ok {
		return v, true
	}
	v := newValue()
	prev, ok, evicted := c.c.PeekOrAdd(key, v)
	if evicted {
		c.evictions.Add(1)
	}
	if ok {
		return prev, true
	}
	return v, false
}

// Remove drops key, if present.
func (c *Cache[K, V]) Remove(key K) { c.c.Remove(key) }

// RemoveFunc drops every entry whose key satisfies drop and returns how many it dropped.
func (c *Cache[K, V]) RemoveFunc(drop func(K) bool) int {
	n := 0
	for _, k := range c.c.Keys() {
		if drop(k) && c.c.Remove(k) {
			n++
		}
	}
	return n
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return c.c.Len() }

// Evictions returns how many entries were evicted to keep the bound (Remove and RemoveFunc are
// not evictions).
func (c *Cache[K, V]) Evictions() uint64 { return c.evictions.Load() }
