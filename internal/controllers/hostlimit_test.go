package controllers

import (
	"strconv"
	"testing"
	"time"
)

// Periodic re-verifications of one host are spaced evenly: of many deployments due together one
// freezes now and each other holds its own later slot, one interval apart; another host is not
// held back; a freeze that must not wait still spends the host's allowance.
func TestHostFreezeLimiterSpacesOneHost(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l := NewHostFreezeLimiter(6) // one freeze each 10 s
	if d := l.Wait("d0", "https://Popular.example:443/mcp", t0); d != 0 {
		t.Fatalf("first freeze of a host waited %v", d)
	}
	for i := 1; i <= 5; i++ {
		want := time.Duration(i) * 10 * time.Second
		if d := l.Wait("d"+string(rune('0'+i)), "https://popular.example:443/other", t0); d != want {
			t.Errorf("deployment %d: wait %v, want %v (its own slot)", i, d, want)
		}
	}
	// A deployment asking again before its slot keeps the same slot (it takes no second one).
	if d := l.Wait("d1", "https://popular.example:443/mcp", t0.Add(4*time.Second)); d != 6*time.Second {
		t.Errorf("d1 asked again: wait %v, want the remaining 6s", d)
	}
	if d := l.Wait("d1", "https://popular.example:443/mcp", t0.Add(10*time.Second)); d != 0 {
		t.Errorf("d1 at its slot: wait %v, want 0", d)
	}
	// The next newcomer queues after d5's slot.
	if d := l.Wait("d6", "https://popular.example:443/mcp", t0.Add(10*time.Second)); d != 50*time.Second {
		t.Errorf("d6: wait %v, want 50s (after the five held slots)", d)
	}
	// Another host (a port differs) is not held back.
	if d := l.Wait("e0", "https://popular.example:8443/mcp", t0); d != 0 {
		t.Errorf("another host waited %v", d)
	}
	// A freeze that cannot wait still counts.
	l.Take("https://new.example/mcp", t0)
	if d := l.Wait("f0", "https://new.example/mcp", t0); d != 10*time.Second {
		t.Errorf("after a Take: wait %v, want 10s", d)
	}
}

// No limit configured: nothing waits (the twin: a nil limiter is what 0 builds).
func TestHostFreezeLimiterOff(t *testing.T) {
	l := NewHostFreezeLimiter(0)
	if l != nil {
		t.Fatal("0 per minute built a limiter")
	}
	now := time.Now()
	for i := 0; i < 100; i++ {
		if d := l.Wait("d", "https://popular.example/mcp", now); d != 0 {
			t.Fatalf("no limit, yet waited %v", d)
		}
	}
	l.Take("https://popular.example/mcp", now)
}

// BenchmarkHostFreezeLimiterStorm replays 5,000 deployments of one upstream host coming due
// together (a manager restart after an outage) through the limiter at 60 freezes a minute, each
// pass requeued for the wait Wait returns, and reports the busiest minute's freezes (never above
// the limit), the passes per freeze (2: each waiter passed once to take its slot and once at it)
// and the minutes until the last one froze.
func BenchmarkHostFreezeLimiterStorm(b *testing.B) {
	const n, perMinute = 5000, 60
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var busiest, passes int
	var last time.Duration
	for i := 0; i < b.N; i++ {
		l := NewHostFreezeLimiter(perMinute)
		due := make(map[string]time.Time, n)
		for d := 0; d < n; d++ {
			due["d"+strconv.Itoa(d)] = t0
		}
		perMin := map[int64]int{}
		passes = 0
		for len(due) > 0 {
			for id, at := range due {
				passes++
				if w := l.Wait(id, "https://popular.example/mcp", at); w > 0 {
					due[id] = at.Add(w)
					continue
				}
				perMin[int64(at.Sub(t0)/time.Minute)]++
				if at.Sub(t0) > last {
					last = at.Sub(t0)
				}
				delete(due, id)
			}
		}
		busiest = 0
		for _, c := range perMin {
			busiest = max(busiest, c)
		}
	}
	b.ReportMetric(float64(busiest), "busiest-min-freezes")
	b.ReportMetric(float64(passes)/n, "passes/freeze")
	b.ReportMetric(last.Minutes(), "minutes-to-last")
}
