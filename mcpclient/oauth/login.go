package oauth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// ErrNotProtected reports that the MCP server answered without asking for authorization, so
// there is nothing to log in to.
var ErrNotProtected = errors.New("oauth: the server did not ask for authorization")

// probeBody is a JSON-RPC ping: enough for a protected endpoint to answer 401 with its
// challenge; its answer is never read.
var probeBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)

// Login runs a fresh authorization for the handler's server (even if a credential is stored),
// stores the credential, and checks that the server accepts it. The server's own 401
// challenge starts the flow, so its resource metadata is found as an MCP client would find it.
// It returns the stored credential (print it with %v: no secrets).
func (h *Handler) Login(ctx context.Context) (*Credential, error) {
	resp, req, err := h.probe(ctx, "")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		resp.Body.Close()
		return nil, ErrNotProtected
	}
	if err := h.authorize(ctx, req, resp, true); err != nil {
		return nil, err
	}
	cred := h.Credential()
	if cred == nil {
		return nil, &AuthorizationError{Stage: "token"}
	}
	ts, err := h.TokenSource(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := ts.Token()
	if err != nil {
		return nil, err
	}
	resp, _, err = h.probe(ctx, tok.AccessToken)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, &AuthorizationError{Stage: "verification", Code: "invalid_token"}
	}
	return h.Credential(), nil
}

// probe POSTs a ping to the MCP endpoint, with the bearer when token is not empty. The MCP
// server is the resource itself, reached through the handler's guarded client.
func (h *Handler) probe(ctx context.Context, token string) (*http.Response, *http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.resource, bytes.NewReader(probeBody))
	if err != nil {
		return nil, nil, &BindingError{What: "resource"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	h.refusals.reset()
	resp, err := h.client.Do(req)
	if err != nil {
		if r := h.dialRefusal(); r != nil {
			return nil, nil, r
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, &AuthorizationError{Stage: "probe"}
	}
	// Only the status and headers matter; keep the body bounded for the handler that closes it.
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, 1<<16), resp.Body}
	return resp, req, nil
}

// Forget deletes every credential stored for the MCP server at serverURL (client
// registrations are kept) and returns how many were deleted.
func Forget(ctx context.Context, store Store, serverURL string) (int, error) {
	res, err := CanonicalResource(serverURL)
	if err != nil {
		return 0, err
	}
	creds, err := store.List(ctx, res)
	if err != nil {
		return 0, err
	}
	for _, c := range creds {
		if err := store.Delete(ctx, c.Key); err != nil {
			return 0, err
		}
	}
	return len(creds), nil
}
