// Package authphase lets an OAuth handler mark the interactive part of an authorization (the
// user in a browser, the redirect awaited) so that the caller bounding the authorization runs
// that part under its own deadline instead of the deadline of the network exchanges.
//
// mcpclient installs the hook around every authorization the transport starts (Limits.OAuthTimeout
// for discovery, registration and token exchange, Limits.LoginTimeout for the interactive part);
// package mcpclient/oauth enters the interactive phase around its fetcher. A context without the
// hook (a login run outside mcpclient) is left as it is.
package authphase

import "context"

type key struct{}

// Enter starts an interactive phase under ctx: it returns the context the wait runs under and a
// function that ends the phase (called exactly once).
type Enter func(ctx context.Context) (context.Context, func())

// With returns a child of ctx carrying enter.
func With(ctx context.Context, enter Enter) context.Context {
	return context.WithValue(ctx, key{}, enter)
}

// Interactive starts the interactive phase of ctx's authorization: the wait for the user runs
// under the returned context, and end is called when it is over. Without a hook in ctx it
// returns ctx and a no-op.
func Interactive(ctx context.Context) (waitCtx context.Context, end func()) {
	if enter, ok := ctx.Value(key{}).(Enter); ok && enter != nil {
		return enter(ctx)
	}
	return ctx, func() {}
}
