package envtest

// The goroutine-leak check of the resilience stories sees a leak: its ignore list does not hide
// a goroutine a story forgot to stop.

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// leakyStoryWorker blocks until release is closed: a goroutine a story forgot to stop.
func leakyStoryWorker(release <-chan struct{}) { <-release }

// Must-fail: a goroutine started after the snapshot and still running is reported, by the
// function it runs. Must-pass twin: once it has returned, the same check finds nothing.
func TestResilienceLeakCheckSeesALeak(t *testing.T) {
	opts := append(leakOptions(), goleak.IgnoreCurrent())
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leakyStoryWorker(release)
	}()
	err := findLeaks(opts, 0)
	if err == nil || !strings.Contains(err.Error(), "leakyStoryWorker") {
		close(release)
		t.Fatalf("the leak check missed a running goroutine: %v", err)
	}
	close(release)
	<-done
	if err := findLeaks(opts, leakSettle); err != nil {
		t.Fatalf("the leak check reports a goroutine that has returned: %v", err)
	}
}
