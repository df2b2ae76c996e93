package controllers

import (
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/b10x/connector-mcp/internal/lru"
)

// hostLimiterSize bounds how many upstream hosts a HostFreezeLimiter remembers (hosts come from
// tenants' URLs): a host it forgot starts with a fresh allowance.
const hostLimiterSize = 10000

// waitingSlotsSize bounds how many waiting deployments' reserved slots are remembered: one that
// is forgotten reserves a new slot on its next pass.
const waitingSlotsSize = 1 << 17

// HostFreezeLimiter spaces the periodic re-verification freezes of the deployments that share an
// upstream host (scheme, host and port of spec.mcpConnection.url) to at most PerMinute a minute,
// evenly: one popular server is not hammered by thousands of deployments coming due together.
// Only periodic re-verifications wait; a first activation, a spec, profile or credential change
// and a requested re-verification freeze at once (they do take their share of the allowance).
// Safe for concurrent use.
type HostFreezeLimiter struct {
	every time.Duration
	mu    sync.Mutex
	hosts *lru.Cache[string, *rate.Limiter]
	// slots holds the time each waiting deployment's reserved freeze comes due.
	slots *lru.Cache[string, time.Time]
}

// NewHostFreezeLimiter returns a limiter of perMinute freezes per host a minute; nil (no limit)
// when perMinute <= 0.
func NewHostFreezeLimiter(perMinute int) *HostFreezeLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &HostFreezeLimiter{every: time.Minute / time.Duration(perMinute), hosts: lru.New[string, *rate.Limiter](hostLimiterSize),
		slots: lru.New[string, time.Time](waitingSlotsSize)}
}

// hostKey is the upstream a URL names: scheme, lower-cased host and port.
func hostKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

func (l *HostFreezeLimiter) limiter(host string) *rate.Limiter {
	lim, _ := l.hosts.GetOrAdd(host, func() *rate.Limiter { return rate.NewLimiter(rate.Every(l.every), 1) })
	return lim
}

// Wait decides whether the periodic re-verification of deployment (a stable key, its UID)
// against rawURL's host may freeze at now: 0 when it may (its slot has come, or the host has one
// free), else how long until the slot it now holds. A deployment holds at most one slot, so the
// waiters of one host wake one per slot, not all at every slot. A nil limiter never waits.
func (l *HostFreezeLimiter) Wait(deployment, rawURL string, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.slots.Get(deployment); ok {
		if now.Before(at) {
			return at.Sub(now)
		}
		l.slots.Remove(deployment)
		return 0
	}
	d := l.limiter(hostKey(rawURL)).ReserveN(now, 1).DelayFrom(now)
	if d <= 0 {
		return 0
	}
	l.slots.Add(deployment, now.Add(d))
	return d
}

// Take takes a freeze of rawURL's host at now whether or not one is free (a freeze that must not
// wait still counts against the host's allowance).
func (l *HostFreezeLimiter) Take(rawURL string, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.limiter(hostKey(rawURL)).ReserveN(now, 1)
}
