package controllers

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// nextVerification is when a deployment frozen at last is re-verified: last + interval plus a
// deterministic per-object jitter of up to jitter×interval, derived from seed (the object's
// UID), so that reconciling an unchanged object always computes the same time and many
// deployments do not re-freeze in lockstep.
func nextVerification(last time.Time, interval time.Duration, jitter float64, seed string) time.Time {
	if jitter <= 0 {
		return last.Add(interval)
	}
	h := sha256.Sum256([]byte(seed))
	frac := float64(binary.BigEndian.Uint64(h[:8])) / float64(^uint64(0))
	return last.Add(interval + time.Duration(jitter*frac*float64(interval)))
}
