package controllers

import (
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultRetryMaxInterval caps the retry delay of transient failures when
// DeploymentReconciler.RetryMaxInterval is zero.
const DefaultRetryMaxInterval = 5 * time.Minute

// RetryBackoff is the delay before retry number failures (1 for the first) of a transient
// failure: base doubled per consecutive failure, capped at maxDelay, then jittered into
// [d/2, d) by u in [0, 1) ("equal jitter"). Deployments failing together against one dead
// server draw different u, so their retries do not arrive in lockstep; none retries sooner than
// half its step.
func RetryBackoff(base, maxDelay time.Duration, failures int, u float64) time.Duration {
	if base <= 0 {
		base = time.Second
	}
	if maxDelay < base {
		maxDelay = base
	}
	d := base
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	if u < 0 || u >= 1 {
		u = 0
	}
	return d/2 + time.Duration(float64(d/2)*u)
}

// retryJitter is the jitter draw of an object's retry number failures: a hash of its UID and
// the attempt, uniform in [0, 1), so it differs between objects and between attempts, and a
// test can predict it.
func retryJitter(uid types.UID, failures int) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(failures)))
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// retryCounter counts consecutive transient failures per deployment.
type retryCounter struct {
	mu sync.Mutex
	m  map[types.NamespacedName]int
}

// next records one more transient failure of name and returns the count.
func (c *retryCounter) next(name types.NamespacedName) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]int{}
	}
	c.m[name]++
	return c.m[name]
}

// reset forgets name's failures (after a pass without a transient failure, or deletion).
func (c *retryCounter) reset(name types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}
