package envtest

// Shared waits of the stories: every wait polls the condition it waits for (an object's status,
// an event, a served request, a controller's work queue), never a fixed time.

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// pollInterval is how often a wait re-reads what it waits for.
const pollInterval = 100 * time.Millisecond

// pollUntil calls cond every interval until it reports true (it returns true) or timeout passes
// (it returns false).
func pollUntil(interval, timeout time.Duration, cond func() bool) bool {
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }) == nil
}

// The controllers of the manager (their names in controller-runtime's metrics).
const (
	deploymentController  = "servicedeployment"
	profileController     = "mcpserviceprofile"
	credentialController  = "mcpcredential" //nolint:gosec // G101: a controller name, not a credential
	trustPolicyController = "mcptrustpolicy"
)

// controllerWork is the number of passes of the named controller (over every running manager)
// that are running or queued ready to run, read from controller-runtime's metrics: the
// controller_runtime_active_workers gauge and the workqueue_depth gauge. It is an error when
// either gauge has no series for the controller (a renamed controller or metric would otherwise
// read as idle).
func controllerWork(name string) (float64, error) {
	n, seen, err := gaugedWork(name)
	if err == nil && !seen {
		err = fmt.Errorf("controller %q: no active-workers or work-queue-depth series", name)
	}
	return n, err
}

// gaugedWork is controllerWork, reporting whether both gauges have series for the controller
// instead of failing (before a manager's first start in the process, they have none).
func gaugedWork(name string) (float64, bool, error) {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, false, err
	}
	var n float64
	seen := map[string]bool{}
	for _, mf := range mfs {
		var label string
		switch mf.GetName() {
		case "controller_runtime_active_workers":
			label = "controller"
		case "workqueue_depth":
			label = "name"
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, label) == name {
				n += m.GetGauge().GetValue()
				seen[mf.GetName()] = true
			}
		}
	}
	return n, len(seen) == 2, nil
}

// reconcileTotal is the number of passes of the named controller that have finished (over every
// manager of the test process): controller_runtime_reconcile_total summed over its results.
func reconcileTotal(name string) (float64, error) {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "controller") == name {
				n += m.GetCounter().GetValue()
				found = true
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("controller %q: no controller_runtime_reconcile_total series", name)
	}
	return n, nil
}

// finishedPasses is reconcileTotal, failing the test when the metrics cannot be read.
func finishedPasses(t testing.TB, name string) float64 {
	t.Helper()
	n, err := reconcileTotal(name)
	if err != nil {
		t.Fatalf("read controller-runtime metrics: %v", err)
	}
	return n
}

// waitFinished waits until at least n more passes of the named controller than before have
// finished, then until the named controllers are idle.
func waitFinished(t testing.TB, op *operator, name string, before float64, n int, controllers ...string) {
	t.Helper()
	if !pollUntil(20*time.Millisecond, storyTimeout, func() bool { return finishedPasses(t, name) >= before+float64(n) }) {
		t.Fatalf("controller %s: %v passes finished after %s, want at least %d", name, finishedPasses(t, name)-before, storyTimeout, n)
	}
	waitIdle(t, op, controllers...)
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// waitIdle waits until each named controller of op has no pass running and none queued: every
// pass that was queued before the call has finished. (A pass queued later, by a watch event
// still in flight, is not waited for: callers first wait for the pass they caused to start.)
// The gauges are process-wide, so op must be the only manager running those controllers;
// managers stopped before op started are accounted for by op.idleBase.
func waitIdle(t testing.TB, op *operator, controllers ...string) {
	t.Helper()
	var last error
	var busy string
	var work float64
	if !pollUntil(20*time.Millisecond, storyTimeout, func() bool {
		for _, c := range controllers {
			n, err := controllerWork(c)
			if last = err; err != nil || n > op.idleBase[c] {
				busy, work = c, n-op.idleBase[c]
				return false
			}
		}
		return true
	}) {
		t.Fatalf("controller %s still busy (%v passes running or queued) after %s (err %v)", busy, work, storyTimeout, last)
	}
}

// waitPasses waits until the manager has started at least n more passes over the object key
// ("ns/name", or profileGetsPrefix+"ns/name") than before, then until the named controllers
// are idle, so those passes have finished.
func waitPasses(t testing.TB, op *operator, key string, before, n int, controllers ...string) {
	t.Helper()
	if !pollUntil(20*time.Millisecond, storyTimeout, func() bool { return op.reconciles(key) >= before+n }) {
		t.Fatalf("%s: %d passes after %s, want at least %d", key, op.reconciles(key)-before, storyTimeout, n)
	}
	waitIdle(t, op, controllers...)
}

// waitNextSecond waits until the clock has passed the second of ts: an object created after it
// has a later creation timestamp (creation timestamps have second resolution).
func waitNextSecond(t testing.TB, ts metav1.Time) {
	t.Helper()
	next := ts.Truncate(time.Second).Add(time.Second)
	if !pollUntil(20*time.Millisecond, storyTimeout, func() bool { return !time.Now().Before(next) }) {
		t.Fatalf("the clock did not pass %s", next)
	}
}
