package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// DefaultReverifyMinInterval is how often, at most, one gateway replica asks for the
// re-verification of one deployment.
const DefaultReverifyMinInterval = 5 * time.Second

// Reverifier asks the manager to re-freeze a deployment at once by setting
// apiv1.ReverifyRequestedAtAnnotation to the request time (rounded up to the second) with a merge
// patch. Requests for one deployment are sent at most once per MinInterval.
type Reverifier struct {
	// Client patches ServiceDeployments (RBAC: patch servicedeployments).
	Client client.Client
	// MinInterval spaces requests per deployment (zero: DefaultReverifyMinInterval).
	MinInterval time.Duration
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// Request asks for the re-verification of deployment key. It reports whether a patch was sent.
func (r *Reverifier) Request(ctx context.Context, key types.NamespacedName) (bool, error) {
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	min := r.MinInterval
	if min == 0 {
		min = DefaultReverifyMinInterval
	}
	r.mu.Lock()
	if r.last == nil {
		r.last = map[types.NamespacedName]time.Time{}
	}
	if t, ok := r.last[key]; ok && now.Sub(t) < min {
		r.mu.Unlock()
		return false, nil
	}
	r.last[key] = now
	r.mu.Unlock()
	at := now.Truncate(time.Second)
	if at.Before(now) {
		at = at.Add(time.Second)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		apiv1.ReverifyRequestedAtAnnotation: at.UTC().Format(time.RFC3339)}}})
	sd := &apiv1.ServiceDeployment{}
	sd.Namespace, sd.Name = key.Namespace, key.Name
	if err := r.Client.Patch(ctx, sd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		r.mu.Lock()
		delete(r.last, key)
		r.mu.Unlock()
		return false, sanitizeAuthz(err)
	}
	return true, nil
}
