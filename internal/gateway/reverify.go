package gateway

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// DefaultReverifyMinInterval is how often, at most, one gateway replica asks for the
// re-verification of one deployment.
const DefaultReverifyMinInterval = 5 * time.Second

// Reverifier asks the manager to re-freeze a deployment at once by creating an
// apiv1.McpReverifyRequest naming it in its namespace (RBAC: create mcpreverifyrequests; the
// gateway needs no write on ServiceDeployments). The manager freezes, at most once per
// apiv1.ReverifyRequestMinInterval, and deletes the request. Requests for one deployment are sent
// at most once per MinInterval.
type Reverifier struct {
	// Client creates McpReverifyRequests.
	Client client.Client
	// MinInterval spaces requests per deployment (zero: DefaultReverifyMinInterval).
	MinInterval time.Duration
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// Request asks for the re-verification of deployment key. It reports whether a request was sent.
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
	rq := &apiv1.McpReverifyRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, GenerateName: reverifyRequestPrefix(key.Name)},
		Spec:       apiv1.McpReverifyRequestSpec{DeploymentName: key.Name, Reason: apiv1.ReverifyReasonLiveDrift},
	}
	if err := r.Client.Create(ctx, rq); err != nil {
		r.mu.Lock()
		delete(r.last, key)
		r.mu.Unlock()
		return false, sanitizeAuthz(err)
	}
	return true, nil
}

// reverifyRequestPrefix is the generateName of a request for deployment name: the name, cut so
// that the apiserver's five random characters still fit in 253.
func reverifyRequestPrefix(name string) string {
	const maxPrefix = 253 - 5 - 1
	if len(name) > maxPrefix {
		name = name[:maxPrefix]
	}
	return name + "-"
}
