package writecount

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestCountsWritesNotReads pins that every kind of write is counted once and reads are not.
func TestCountsWritesNotReads(t *testing.T) {
	n := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithStatusSubresource(&corev1.Pod{}).Build(), Funcs(func() { n++ }))
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	steps := []func() error{
		func() error { return c.Create(ctx, pod) },
		func() error { return c.Get(ctx, client.ObjectKeyFromObject(pod), pod) },
		func() error { pod.Labels = map[string]string{"a": "b"}; return c.Update(ctx, pod) },
		func() error { return c.Patch(ctx, pod, client.MergeFrom(pod.DeepCopy())) },
		func() error { return c.Status().Update(ctx, pod) },
		func() error { return c.Status().Patch(ctx, pod, client.MergeFrom(pod.DeepCopy())) },
		func() error { return c.List(ctx, &corev1.PodList{}) },
		func() error { return c.Delete(ctx, pod) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if n != 6 {
		t.Fatalf("counted %d writes, want 6 (create, update, patch, status update, status patch, delete)", n)
	}
}
