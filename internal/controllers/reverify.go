package controllers

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// nextVerification is when a deployment frozen at last is re-verified.
//
// With jitter > 0 every deployment has its own point in the interval, derived from seed (the
// object's UID) and spread evenly over the whole interval: the times phase + k×interval since the
// Unix epoch. Its next re-verification is the first of those points at least jitter×interval
// after last, so it comes between jitter×interval and (1+jitter)×interval after the last freeze,
// and once a deployment re-verifies at its point it does so exactly every interval. Many
// deployments frozen together (a bulk create, a restore) therefore re-verify at an even rate
// over the interval from their first re-verification on, instead of in one wave shaped like
// their activation. The computation is deterministic: reconciling an unchanged object always
// yields the same time.
//
// With jitter <= 0 it is exactly last + interval.
func nextVerification(last time.Time, interval time.Duration, jitter float64, seed string) time.Time {
	if jitter <= 0 || interval <= 0 {
		return last.Add(interval)
	}
	h := sha256.Sum256([]byte(seed))
	frac := float64(binary.BigEndian.Uint64(h[:8])) / (float64(^uint64(0)) + 1)
	phase := time.Duration(frac * float64(interval))
	if interval >= time.Second {
		// Whole seconds, as status.lastFrozenTime is stored: a freeze at its point records a time
		// at or after it, so the next point is one interval on, not the same one again.
		phase = phase.Truncate(time.Second)
	}
	earliest := last.Add(time.Duration(min(jitter, 1) * float64(interval)))
	into := time.Duration(earliest.UnixNano() % int64(interval))
	if into < 0 {
		into += interval
	}
	wait := phase - into
	if wait < 0 {
		wait += interval
	}
	return earliest.Add(wait)
}
