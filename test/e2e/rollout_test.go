//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaderTakeover: the Pod holding the manager's Lease is deleted at once (grace 0); the other
// replica takes the Lease.
func (e *env) leaderTakeover(t *testing.T) {
	ctx := t.Context()
	holder := e.leaseHolder(t)
	pod, _, _ := strings.Cut(holder, "_")
	if err := e.cs.CoreV1().Pods(namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The chart's lease duration is 15 s (controller-runtime's default); with the holder gone
	// without releasing, the other replica acquires it after at most that plus a retry period.
	deadline := start.Add(2 * time.Minute)
	for {
		if h := e.leaseHolder(t); h != "" && !strings.HasPrefix(h, pod+"_") {
			t.Logf("lease taken over by %s %.1fs after %s was killed", h, time.Since(start).Seconds(), pod)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other replica took the Lease within 2 minutes of killing %s", pod)
		}
		time.Sleep(time.Second)
	}
}

func (e *env) leaseHolder(t *testing.T) string {
	l, err := e.cs.CoordinationV1().Leases(namespace).Get(t.Context(), "connector-mcp.connectors.b10x.io", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// upgrade: `helm upgrade` to a second image digest (another source date, so another build) rolls
// both Deployments; every Pod then runs the new digest and is Ready.
func (e *env) upgrade(t *testing.T) {
	ctx := t.Context()
	out := e.must(ctx, "env", "SOURCE_DATE_EPOCH=1700000000", "make", "-s", "image", "IMAGE_REPO="+e.imageRepo, "IMAGE_PLATFORMS=linux/amd64")
	next := digestIn(out)
	if next == "" || next == e.digest {
		t.Fatalf("the second build gave no new digest: %q", out)
	}
	e.must(ctx, e.helm, "upgrade", release, "charts/connector-mcp", "--namespace", namespace, "--reuse-values",
		"--set", "image.digest="+next, "--wait", "--timeout", "5m")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			t.Fatal(err)
		}
		ready, old := 0, 0
		for _, p := range pods.Items {
			if !strings.HasSuffix(p.Spec.Containers[0].Image, "@"+next) {
				old++
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if old == 0 && ready == 4 {
			e.digest = next
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after helm upgrade: %d pods on the old digest, %d Ready on the new one (want 0 and 4)", old, ready)
		}
		time.Sleep(time.Second)
	}
}
