package lru

import (
	"strconv"
	"sync"
	"testing"
)

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Add("a", 1)
	c.Add("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recently used
		t.Fatalf("a = %d %v", v, ok)
	}
	c.Add("c", 3) // evicts b
	if _, ok := c.Get("b"); ok {
		t.Fatal("b survived although least recently used")
	}
	// Twin: the recently used entries stay, and the bound holds.
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("a evicted: %d %v", v, ok)
	}
	if v, ok := c.Get("c"); !ok || v != 3 {
		t.Fatalf("c = %d %v", v, ok)
	}
	if c.Len() != 2 || c.Evictions() != 1 {
		t.Fatalf("len %d evictions %d", c.Len(), c.Evictions())
	}
	// Re-adding an existing key replaces its value and evicts nothing.
	c.Add("a", 10)
	if v, _ := c.Get("a"); v != 10 || c.Evictions() != 1 || c.Len() != 2 {
		t.Fatalf("a = %d, evictions %d", v, c.Evictions())
	}
}

func TestGetOrAdd(t *testing.T) {
	c := New[int, *int](1)
	made := 0
	mk := func() *int { made++; v := made; return &v }
	a, loaded := c.GetOrAdd(1, mk)
	if loaded || *a != 1 {
		t.Fatalf("first: %d %v", *a, loaded)
	}
	if b, loaded := c.GetOrAdd(1, mk); !loaded || b != a || made != 1 {
		t.Fatalf("second: loaded %v, made %d", loaded, made)
	}
	c.GetOrAdd(2, mk) // evicts 1
	if b, loaded := c.GetOrAdd(1, mk); loaded || b == a || made != 3 {
		t.Fatalf("after eviction: loaded %v, made %d", loaded, made)
	}
}

func TestRemove(t *testing.T) {
	c := New[string, int](10)
	for i := range 6 {
		c.Add("k"+strconv.Itoa(i), i)
	}
	c.Remove("k0")
	if n := c.RemoveFunc(func(k string) bool { return k == "k1" || k == "k2" }); n != 2 {
		t.Fatalf("removed %d", n)
	}
	if c.Len() != 3 || c.Evictions() != 0 {
		t.Fatalf("len %d evictions %d", c.Len(), c.Evictions())
	}
	for _, k := range []string{"k0", "k1", "k2"} {
		if _, ok := c.Get(k); ok {
			t.Fatalf("%s still there", k)
		}
	}
	if _, ok := c.Get("k3"); !ok {
		t.Fatal("k3 removed")
	}
}

func TestSizeAtLeastOne(t *testing.T) {
	c := New[int, int](0)
	c.Add(1, 1)
	c.Add(2, 2)
	if c.Size() != 1 || c.Len() != 1 {
		t.Fatalf("size %d len %d", c.Size(), c.Len())
	}
}

func TestConcurrentUseStaysBounded(t *testing.T) {
	c := New[int, int](64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := g*1000 + i
				c.GetOrAdd(k, func() int { return k })
				if v, ok := c.Get(k); ok && v != k {
					t.Errorf("key %d holds %d", k, v)
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() != 64 || c.Evictions() != 8000-64 {
		t.Fatalf("len %d evictions %d", c.Len(), c.Evictions())
	}
}
