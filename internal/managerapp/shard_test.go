package managerapp

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// --watch-label-selector selects the shard's objects; an empty one selects all; one that does
// not parse is refused by Validate with ErrWatchLabelSelector.
func TestWatchLabelSelector(t *testing.T) {
	o := DefaultOptions()
	if sel, err := o.ShardSelector(); err != nil || sel != nil {
		t.Fatalf("empty selector = %v, %v; want nil (all objects)", sel, err)
	}
	o.WatchLabelSelector = "sharding.connectors.b10x.io/key in (shard1)"
	sel, err := o.ShardSelector()
	if err != nil || o.Validate() != nil {
		t.Fatalf("valid selector refused: %v", err)
	}
	if !sel.Matches(labels.Set{"sharding.connectors.b10x.io/key": "shard1"}) || sel.Matches(labels.Set{"sharding.connectors.b10x.io/key": "shard2"}) || sel.Matches(labels.Set{}) {
		t.Fatal("the selector does not select exactly shard1")
	}
	o.WatchLabelSelector = "sharding.connectors.b10x.io/key in (shard1"
	if err := o.Validate(); !errors.Is(err, ErrWatchLabelSelector) {
		t.Fatalf("Validate = %v, want ErrWatchLabelSelector", err)
	}
}

// Each shard elects its own leader; the unsharded manager keeps the historical lease name.
func TestLeaderElectionIDPerShard(t *testing.T) {
	base := LeaderElectionID("")
	if base != "connector-mcp.connectors.b10x.io" {
		t.Fatalf("unsharded lease = %q", base)
	}
	a, b := LeaderElectionID("k in (shard1)"), LeaderElectionID("k in (shard2)")
	if a == b || a == base || a != LeaderElectionID("k in (shard1)") || len(a) > 63 {
		t.Fatalf("shard leases %q and %q are not distinct, stable DNS labels", a, b)
	}
}

// The cache strips managedFields from every object it holds (and keeps what is read).
func TestCacheOptionsStripManagedFields(t *testing.T) {
	co := CacheOptions()
	if co.DefaultTransform == nil {
		t.Fatal("no default transform")
	}
	secretSelected := false
	for obj, bo := range co.ByObject {
		if _, ok := obj.(*corev1.Secret); ok && bo.Label != nil && !bo.Label.Empty() {
			secretSelected = true
		}
	}
	if !secretSelected {
		t.Fatal("the Secret informer is not label-filtered")
	}
	sd := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: v1.ServiceDeploymentSpec{ProviderID: "p"}}
	out, err := co.DefaultTransform(sd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1.ServiceDeployment)
	if len(got.ManagedFields) != 0 || got.Spec.ProviderID != "p" || got.Labels["a"] != "b" {
		t.Fatalf("transformed object = %+v", got.ObjectMeta)
	}
}
