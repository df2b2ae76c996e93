package envtest

// Shared helpers of the resilience stories (resilience_*_test.go): a goroutine-leak check run
// after each story's own cleanups, event counting that sees aggregated repeats, a status log fed
// by a watch, and re-verification requests.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// leakOptions are the goroutines that outlive a story by design: the suite's shared admin
// client keeps keep-alive connections to the apiserver (and opens new ones after a restart),
// client-go's process-wide transport cache keeps those of the managers' clients, klog runs a
// process-wide flush daemon, and envtest waits on the suite's kube-apiserver process (a new one
// after the apiserver story's restarts). Every other goroutine a story starts (managers,
// informers, leader electors, event broadcasters, watches, MCP and registry servers) must be
// gone once the story's cleanups have run.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/internal/testing/process.(*State).Start.func1"),
	}
}

// checkNoLeaks records the goroutines running now and, after every cleanup the story registers
// later has run (cleanups run last-registered first), fails the story if a goroutine it started
// is still running. Call it first in a story.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	opts := append(leakOptions(), goleak.IgnoreCurrent())
	t.Cleanup(func() {
		if err := findLeaks(opts, leakSettle); err != nil {
			t.Errorf("goroutine leak after the story: %v", err)
		}
	})
}

// leakSettle is how long stopped managers and servers may take to wind down before a goroutine
// still running counts as leaked.
const leakSettle = 30 * time.Second

// findLeaks runs goleak.Find (which itself retries for about a second) until it finds nothing
// or settle has passed, and returns its last answer.
func findLeaks(opts []goleak.Option, settle time.Duration) error {
	var err error
	pollUntil(250*time.Millisecond, settle, func() bool { err = goleak.Find(opts...); return err == nil })
	return err
}

// eventCounts returns, per "Type/Reason", how many times the events regarding the named object
// were recorded: an event aggregated by the recorder counts its series (or deprecated count),
// so a repeat folded into one Event object still counts as a repeat.
func eventCounts(t testing.TB, ns, name string) map[string]int32 {
	t.Helper()
	var list eventsv1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, e := range list.Items {
		if e.Regarding.Name != name {
			continue
		}
		n := int32(1)
		switch {
		case e.Series != nil && e.Series.Count > 0:
			n = e.Series.Count
		case e.DeprecatedCount > 1:
			n = e.DeprecatedCount
		}
		out[e.Type+"/"+e.Reason] += n
	}
	return out
}

// addService creates an inline profile and a deployment, both named name, for a copy of base
// with its own service identity, provider and endpoint url, with every operation bound to
// grantRef.
func addService(t testing.TB, ns, name string, base *apiv1.ProfileDocument, url, grantRef string) *apiv1.ServiceDeployment {
	t.Helper()
	doc := base.DeepCopy()
	doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
	mustCreate(t, inlineProfile(ns, name, doc))
	sd := newDeployment(ns, name, name, name, url, doc, nil, grantRef)
	mustCreate(t, sd)
	return sd
}

// requestReverify stamps the ReverifyRequestedAtAnnotation with the current time, as the gateway
// does on drift at call time, and returns the time the manager rounds it up to: a freeze
// satisfies it when status.lastFrozenTime is at or after that second.
func requestReverify(t testing.TB, sd *apiv1.ServiceDeployment) time.Time {
	t.Helper()
	now := time.Now().UTC()
	mutate(t, sd, func(d *apiv1.ServiceDeployment) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[apiv1.ReverifyRequestedAtAnnotation] = now.Format(time.RFC3339Nano)
	})
	return now.Truncate(time.Second).Add(time.Second)
}

// frozenSince reports whether sd was frozen at or after at.
func frozenSince(sd *apiv1.ServiceDeployment, at time.Time) bool {
	return sd.Status.LastFrozenTime != nil && !sd.Status.LastFrozenTime.Time.Before(at)
}

// statusLog is every status of one ServiceDeployment the apiserver sent on a watch.
type statusLog struct {
	mu   sync.Mutex
	seen []apiv1.ServiceDeploymentStatus
}

func (l *statusLog) all() []apiv1.ServiceDeploymentStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]apiv1.ServiceDeploymentStatus(nil), l.seen...)
}

// watchDeployment records every status revision of the deployment ns/name until the story ends,
// re-watching from the last resource version when the apiserver closes the watch.
func watchDeployment(t *testing.T, ns, name string) *statusLog {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := &statusLog{}
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := ""
		first := true
		for ctx.Err() == nil {
			w, err := wc.Watch(ctx, &apiv1.ServiceDeploymentList{}, &client.ListOptions{Namespace: ns,
				FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
				Raw:           &metav1.ListOptions{ResourceVersion: rv}})
			if first {
				close(started)
				first = false
			}
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				sd, ok := ev.Object.(*apiv1.ServiceDeployment)
				if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
					continue
				}
				rv = sd.ResourceVersion
				log.mu.Lock()
				log.seen = append(log.seen, *sd.Status.DeepCopy())
				log.mu.Unlock()
			}
			w.Stop()
		}
	}()
	<-started
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return log
}

// downHandler drops every connection without an answer, as a crashed or restarting server does.
func downHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(errors.New("downHandler: the response writer cannot be hijacked"))
		}
		c, _, err := hj.Hijack()
		if err == nil {
			_ = c.Close()
		}
	})
}

// writeQuiet is how long a manager must make no API write to count as settled. It is a window,
// not a condition: the resilience stories run several managers at once (a leader and its
// follower) or restart the apiserver under one, so controller-runtime's process-wide work-queue
// gauges (waitIdle) cannot say that one manager is done, and a write that does not happen has
// no event to wait for.
const writeQuiet = time.Second

// apiserverSoak is how long the apiserver story lets the manager's watches and retries run
// against the last apiserver before comparing statuses: the assertion is that nothing changes
// during that time, so the window is the assertion.
const apiserverSoak = 2 * time.Second

// settleWrites waits until the manager has made no API write for quiet (writeQuiet or
// apiserverSoak), and returns the count.
func settleWrites(t testing.TB, op *operator, quiet time.Duration) int64 {
	t.Helper()
	last := op.writes.Load()
	settled := wait.PollUntilContextTimeout(context.Background(), quiet, storyTimeout, false, func(context.Context) (bool, error) {
		now := op.writes.Load()
		if now == last {
			return true, nil
		}
		last = now
		return false, nil
	}) == nil
	if !settled {
		t.Fatalf("the manager kept writing (%d writes) for %s", op.writes.Load(), storyTimeout)
	}
	return last
}

// activatedMessages returns the notes of the Activated events regarding the named object.
func activatedMessages(t testing.TB, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == apiv1.ReasonActivated {
			out = append(out, e.Note)
		}
	}
	return out
}
