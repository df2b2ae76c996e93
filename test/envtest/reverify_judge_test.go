package envtest

// The re-verification story's judge, on logs made up here: what it counts as an activation and
// as a periodic freeze, the spread against the even share, a deployment missing from the
// interval, the popular server's busiest minute, and the manager flag it reads its bound from.

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestJudgeReverifySpread(t *testing.T) {
	start := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	interval := 100 * time.Second
	from, to := start.Add(50*time.Second), start.Add(150*time.Second)
	var freezes []seenFreeze
	// Ten other deployments activated at 0 s, each re-verified once in the interval, one per
	// 10 s bucket (the even share is 1); the eleventh is never re-verified.
	for i := range 11 {
		p := fmt.Sprintf("/mcp/%d", i)
		freezes = append(freezes, seenFreeze{at: start.Add(time.Duration(i) * time.Millisecond), path: p})
		if i < 10 {
			freezes = append(freezes, seenFreeze{at: from.Add(time.Duration(i)*10*time.Second + time.Second), path: p})
		}
	}
	// The popular server: one activation, then three periodic freezes within a minute and one later.
	freezes = append(freezes, seenFreeze{at: start, path: "/mcp/p", popular: true})
	for _, s := range []int{60, 70, 80, 145} {
		freezes = append(freezes, seenFreeze{at: start.Add(time.Duration(s) * time.Second), path: "/mcp/p", popular: true})
	}
	f := judgeReverifySpread(start, from, to, interval, nil, freezes)
	if f.otherPeriodic != 10 || f.missing != 1 {
		t.Fatalf("periodic %d, missing %d: want 10 and 1", f.otherPeriodic, f.missing)
	}
	if !near(f.even, 1.1) || !near(f.peak, 1/1.1) || !near(f.quiet, 1/1.1) {
		t.Fatalf("even %v, peak %v, quiet %v: want 1.1 per bucket, one freeze in each", f.even, f.peak, f.quiet)
	}
	if f.popularBusiestMinute != 3 {
		t.Fatalf("popular busiest minute %d, want 3", f.popularBusiestMinute)
	}
	// Under the earlier schedule all eleven come due within 10 s of the interval's end.
	if f.oldPeak < 10/1.1 {
		t.Fatalf("old schedule's busiest bucket %v× the even share, want the eleven together", f.oldPeak)
	}

	// All ten in one bucket: the busiest is ten times the share, the quietest empty.
	for i := range freezes {
		if !freezes[i].popular && freezes[i].at.After(from) {
			freezes[i].at = from.Add(time.Second)
		}
	}
	if f := judgeReverifySpread(start, from, to, interval, nil, freezes); !near(f.peak, 10/1.1) || f.quiet != 0 {
		t.Fatalf("bunched: peak %v, quiet %v", f.peak, f.quiet)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestLastIntFlag(t *testing.T) {
	if n, err := lastIntFlag([]string{"--concurrency=4", "--x=1", "--concurrency=16"}, "--concurrency"); err != nil || n != 16 {
		t.Fatalf("lastIntFlag = %d, %v; want the last one, 16", n, err)
	}
	if _, err := lastIntFlag([]string{"--concurrency", "16"}, "--concurrency"); err == nil {
		t.Fatal("a flag without =N was read")
	}
}
