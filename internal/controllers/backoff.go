package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// defaultRetryMaxInterval caps the retry delay of transient failures when
// DeploymentReconciler.RetryMaxInterval is zero.
const defaultRetryMaxInterval = 5 * time.Minute

// retryBackoff is the delay before retry number failures (1 for the first) of a transient
// failure: base doubled per consecutive failure, capped at maxDelay, then jittered into
// [d/2, d) by u in [0, 1) ("equal jitter"). Deployments failing together against one dead
// server draw different u, so their retries do not arrive in lockstep; none retries sooner than
// half its step.
func retryBackoff(base, maxDelay time.Duration, failures int, u float64) time.Duration {
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

// writtenStatus remembers, per deployment, a digest of the last status this manager wrote and
// the generation it was written for. A pass that computes exactly that status again while the
// informer cache still shows another one is reading a cache that has not caught up with the
// write: it writes nothing (the write's own watch event brings a fresh pass). The memory is
// used once, so a status changed by someone else is still corrected by the pass after.
type writtenStatus struct {
	mu sync.Mutex
	m  map[types.NamespacedName]writtenEntry
}

type writtenEntry struct {
	generation int64
	digest     [32]byte
}

// statusDigest digests sd's status without its timestamps (a repeat computed a moment later
// stamps them anew).
func statusDigest(sd *v1.ServiceDeployment) ([32]byte, bool) {
	st := sd.Status.DeepCopy()
	st.LastFrozenTime = nil
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(b), true
}

// record remembers the status just written for sd.
func (w *writtenStatus) record(sd *v1.ServiceDeployment) {
	d, ok := statusDigest(sd)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]writtenEntry{}
	}
	name := client.ObjectKeyFromObject(sd)
	if !ok {
		delete(w.m, name)
		return
	}
	w.m[name] = writtenEntry{generation: sd.Generation, digest: d}
}

// staleRepeat reports (once) that the cache does not show the status last written for sd's
// generation (orig is the cached object) while the pass computed that very status again (sd).
// Timestamps are left out of the comparison.
func (w *writtenStatus) staleRepeat(orig, sd *v1.ServiceDeployment) bool {
	d, ok := statusDigest(sd)
	cached, okCached := statusDigest(orig)
	w.mu.Lock()
	defer w.mu.Unlock()
	name := client.ObjectKeyFromObject(sd)
	e, found := w.m[name]
	delete(w.m, name)
	return ok && okCached && found && e.generation == sd.Generation && e.digest == d && cached != d
}
