// Package lru is a small, generic, size-bounded least-recently-used cache, safe for concurrent
// use. It bounds the process-lifetime memos of this module (the controllers' resolver memo,
// mcpclient's negotiated-era cache, invocation's compiled-schema cache) so that a stream of
// distinct keys (profiles, server configurations, snapshots) cannot grow memory without limit.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values, holding at most Size entries; adding to a full cache evicts the
// least recently used entry. Get and GetOrAdd count as uses. The zero value is not usable: use
// New.
type Cache[K comparable, V any] struct {
	mu        sync.Mutex
	size      int
	order     *list.List // front: most recently used; elements hold *entry[K, V]
	items     map[K]*list.Element
	evictions uint64
}

type entry[K comparable, V any] struct {
	key   K
	value V
}

// New returns an empty cache holding at most size entries (size < 1 is taken as 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	if size < 1 {
		size = 1
	}
	return &Cache[K, V]{size: size, order: list.New(), items: make(map[K]*list.Element)}
}

// Size returns the bound the cache was created with.
func (c *Cache[K, V]) Size() int { return c.size }

// Get returns the value for key and marks it most recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).value, true
	}
	var zero V
	return zero, false
}

// Add sets the value for key, marking it most recently used, and evicts the least recently used
// entry when the cache is over its bound.
func (c *Cache[K, V]) Add(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(key, value)
}

// GetOrAdd returns the value for key; when there is none it stores and returns newValue(), called
// under the cache's lock (keep it cheap). loaded reports whether the value was already there.
func (c *Cache[K, V]) GetOrAdd(key K, newValue func() V) (value V, loaded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).value, true
	}
	v := newValue()
	c.addLocked(key, v)
	return v, false
}

func (c *Cache[K, V]) addLocked(key K, value V) {
	if el, ok := c.items[key]; ok {
		el.Value.(*entry[K, V]).value = value
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
		c.evictions++
	}
}

// Remove drops key, if present.
func (c *Cache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

// RemoveFunc drops every entry whose key satisfies drop and returns how many it dropped.
func (c *Cache[K, V]) RemoveFunc(drop func(K) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, el := range c.items {
		if drop(key) {
			c.order.Remove(el)
			delete(c.items, key)
			n++
		}
	}
	return n
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Evictions returns how many entries were evicted to keep the bound (Remove and RemoveFunc are
// not evictions).
func (c *Cache[K, V]) Evictions() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictions
}
