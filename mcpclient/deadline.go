package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/b10x/connector-mcp/internal/authphase"
)

// opClock is the deadline of one operation that counts only while it runs: pause stops it (an
// authorization the server asked for runs under its own deadline meanwhile) and the function
// pause returns resumes it with the time that was left. fire runs at most once, when the running
// time reaches the limit.
type opClock struct {
	fire func()

	mu      sync.Mutex
	left    time.Duration
	started time.Time
	timer   *time.Timer
	gen     uint64 // the timer generation allowed to fire
	paused  int
	done    bool
}

// newOpClock starts a clock of d running time that calls fire when it runs out.
func newOpClock(d time.Duration, fire func()) *opClock {
	c := &opClock{fire: fire, left: d}
	c.mu.Lock()
	c.arm()
	c.mu.Unlock()
	return c
}

// arm starts a timer for the time left; c.mu is held.
func (c *opClock) arm() {
	c.gen++
	gen := c.gen
	c.started = time.Now()
	c.timer = time.AfterFunc(max(c.left, 0), func() { c.expire(gen) })
}

func (c *opClock) expire(gen uint64) {
	c.mu.Lock()
	if c.done || c.paused > 0 || gen != c.gen {
		c.mu.Unlock()
		return
	}
	c.done = true
	c.mu.Unlock()
	c.fire()
}

// pause stops the clock until the returned function is called (pauses nest).
func (c *opClock) pause() (resume func()) {
	c.mu.Lock()
	if c.paused == 0 && !c.done {
		c.timer.Stop()
		c.gen++ // a timer already firing is stale
		c.left -= time.Since(c.started)
	}
	c.paused++
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(c.resume) }
}

func (c *opClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused--
	if c.paused == 0 && !c.done {
		c.arm()
	}
}

// stop ends the clock: fire is not called after it returns.
func (c *opClock) stop() {
	c.mu.Lock()
	c.done = true
	c.timer.Stop()
	c.mu.Unlock()
}

// withClock returns a child of parent that is cancelled with cause once d of running time has
// passed on the returned clock, and the function that releases both.
func withClock(parent context.Context, d time.Duration, cause error) (context.Context, *opClock, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c := newOpClock(d, func() { cancel(cause) })
	return ctx, c, func() {
		c.stop()
		cancel(nil)
	}
}

// timedAuthorizer runs every authorization of an OAuth handler under its own deadlines: while it
// runs, the deadline of the operation that met the 401 or 403 (Limits.ProbeTimeout during
// negotiation, Limits.CallTimeout otherwise) is paused; the authorization's exchanges
// (discovery, registration, token exchange, refresh) get Limits.OAuthTimeout (refusal
// "oauth_timeout"), and its interactive part, which the handler marks (package mcpclient/oauth
// does, around its fetcher), Limits.LoginTimeout (refusal "login_timeout"), during which the
// OAuth deadline is paused in turn.
type timedAuthorizer struct {
	inner auth.OAuthHandler
	lim   Limits
}

var _ auth.OAuthHandler = (*timedAuthorizer)(nil)

// TokenSource returns the wrapped handler's token source.
func (a *timedAuthorizer) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return a.inner.TokenSource(ctx)
}

// Authorize runs the wrapped handler's authorization under the OAuth and login deadlines.
func (a *timedAuthorizer) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if st, _ := ctx.Value(callKey{}).(*callState); st != nil && st.clock != nil {
		defer st.clock.pause()()
	}
	oauthCause := refuse(RefusalOAuthTimeout, "authorize", a.lim.OAuthTimeout.Milliseconds(), ErrOAuthTimeout)
	loginCause := refuse(RefusalLoginTimeout, "authorize", a.lim.LoginTimeout.Milliseconds(), ErrLoginTimeout)
	actx, clock, release := withClock(ctx, a.lim.OAuthTimeout, oauthCause)
	defer release()
	var loginExpired atomic.Bool
	actx = authphase.With(actx, func(ctx context.Context) (context.Context, func()) {
		resume := clock.pause()
		lctx, cancel := context.WithCancelCause(ctx)
		t := time.AfterFunc(a.lim.LoginTimeout, func() {
			loginExpired.Store(true)
			cancel(loginCause)
		})
		return lctx, func() {
			t.Stop()
			cancel(nil)
			resume()
		}
	})
	// The handler's own exchanges are not the MCP request's: nothing below records them for it.
	actx = context.WithValue(actx, callKey{}, (*callState)(nil))
	err := a.inner.Authorize(actx, req, resp)
	if err == nil {
		return nil
	}
	switch {
	case loginExpired.Load():
		return loginCause
	case errors.Is(context.Cause(actx), ErrOAuthTimeout):
		return oauthCause
	}
	return err
}
