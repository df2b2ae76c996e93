package adapters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/egress/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// Freezer lists a deployment's live tools through egress with mcpclient.
type Freezer struct {
	// Client negotiates and remembers eras; share one per manager.
	Client *mcpclient.Client
	// Binder builds the egress port of each deployment's binding under the cluster's rules:
	// credential opt-in, namespace egress ceiling, apiserver and Service CIDR deny list. Its
	// Base holds the cluster IP policy, exchange deadline and response bound.
	Binder *k8sbinding.Binder
	// Limits are the MCP bounds (zero fields: mcpclient defaults).
	Limits mcpclient.Limits
}

var _ controllers.Freezer = (*Freezer)(nil)

// Freeze connects to req.URL through a fresh egress port bound to that endpoint, negotiates and
// lists every tool within bounds.
func (f *Freezer) Freeze(ctx context.Context, req controllers.FreezeRequest) (*snapshot.ToolSnapshot, error) {
	tr, err := f.Binder.Transport(ctx, BindingRequest(req))
	if err != nil {
		return nil, BindingError(err)
	}
	defer tr.CloseIdleConnections()
	cfg := mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: req.URL, HTTPClient: tr.HTTPClient()}, Limits: f.Limits}
	// Every freeze negotiates afresh: the era the server negotiates now is part of what is
	// compared with the review, so a remembered era must not stand in for it (and a wrong
	// verdict from one flaky negotiation must not outlive that freeze).
	f.Client.ForgetEra(cfg)
	sess, err := f.Client.Connect(ctx, cfg)
	if err != nil {
		return nil, classify(err, controllers.SanitizeURL(req.URL))
	}
	defer func() { _ = sess.Close() }()
	snap, err := sess.ListTools(ctx)
	if err != nil {
		return nil, classify(err, controllers.SanitizeURL(req.URL))
	}
	return snap, nil
}

// BindingRequest is the k8sbinding request of a freeze.
func BindingRequest(req controllers.FreezeRequest) k8sbinding.Request {
	b := k8sbinding.Request{Namespace: req.Namespace, URL: req.URL, AllowCIDRs: req.AllowCIDRs}
	if req.Credential != nil {
		b.Credential = &egress.CredentialRef{Name: req.Credential.Name, Key: req.Credential.Key}
	}
	if req.CABundle != nil {
		b.CABundle = &k8sbinding.CABundleRef{Name: req.CABundle.Name, Key: req.CABundle.Key}
	}
	return b
}

// BindingError maps a refusal of the binding (see controllers.BindingStageError) onto a
// SnapshotFrozen stage outcome. Nothing has been dialed when it is called.
func BindingError(err error) *controllers.StageError {
	return controllers.BindingStageError(v1.ConditionSnapshotFrozen, err)
}

// classify maps a freeze error onto a stage outcome: named refusals of egress, mcpclient and
// snapshot need a human (FreezeRefused); a missing credential and transport failures are retried.
func classify(err error, where string) error {
	switch {
	case errors.Is(err, k8sbinding.ErrCredentialRefused), errors.Is(err, egress.ErrCredentialUnavailable):
		return BindingError(err)
	case errors.Is(err, egress.ErrTLSRefused):
		// The server's certificate failed verification: a private CA whose bundle is not
		// configured (spec.mcpConnection.caBundleRef), or an impostor. A human must act.
		return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonFreezeRefused, Err: err,
			Message: fmt.Sprintf("the TLS certificate of %s was refused: %s (name the endpoint's CA bundle in spec.mcpConnection.caBundleRef)", where, refusalText(err))}
	case errors.Is(err, mcpclient.ErrInsufficientScope):
		// Step-up: the credential lacks a scope. The condition names what the server asked for,
		// so a human can log in again with it; the cluster never escalates a scope by itself.
		asked := "a scope it did not name"
		var te *mcpclient.TransportError
		if errors.As(err, &te) && len(te.Scopes) > 0 {
			asked = "scope " + strings.Join(te.Scopes, " ")
		}
		return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonFreezeRefused, Err: err,
			Message: fmt.Sprintf("%s requires %s that the credential lacks (%s): log in again with it (mcpctl login --to-secret ... --scope ...); the cluster never escalates scopes", where, asked, mcpclient.RefusalInsufficientScope)}
	case errors.Is(err, egress.ErrDestinationRefused):
		// A destination refused at dial time (a name resolving into a denied or unallowed
		// range, or not resolving) reads exactly like a closed port: status is no port scanner.
		return unreachable(err, where)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, egress.ErrDeadlineExceeded),
		errors.Is(err, mcpclient.ErrCallTimeout), errors.Is(err, mcpclient.ErrProbeTimeout):
		return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonServerUnreachable, Transient: true, Err: err,
			Message: fmt.Sprintf("%s did not answer the tool listing (%s); retrying", where, refusalText(err))}
	case errors.Is(err, mcpclient.ErrConnectionClosed), errors.Is(err, mcpclient.ErrHTTPStatus):
		if isDialFailure(err) {
			return unreachable(err, where)
		}
		return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonServerUnreachable, Transient: true, Err: err,
			Message: fmt.Sprintf("%s did not answer the tool listing (%s); retrying", where, refusalText(err))}
	}
	if _, ok := refusal.As(err); ok {
		return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonFreezeRefused, Err: err,
			Message: fmt.Sprintf("the live tool listing of %s was refused: %s", where, refusalText(err))}
	}
	return unreachable(err, where)
}

// unreachable is the one outcome of every failure to open a connection: refused by the IP
// policy, not resolving, closed, filtered or absent.
func unreachable(err error, where string) *controllers.StageError {
	return &controllers.StageError{Condition: v1.ConditionSnapshotFrozen, Reason: v1.ReasonServerUnreachable, Transient: true, Err: err,
		Message: fmt.Sprintf("%s could not be reached; retrying", where)}
}

// isDialFailure reports whether err records a failed connection attempt (no byte exchanged).
func isDialFailure(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refusalText returns the stable refusal name of err (with the document path for ocipack
// refusals), or a word for the transport failures that carry none.
func refusalText(err error) string {
	switch {
	case controllers.RefusalText(err, "") != "":
		return controllers.RefusalText(err, "")
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, mcpclient.ErrConnectionClosed):
		return "connection_closed"
	case errors.Is(err, mcpclient.ErrHTTPStatus):
		return "http_status"
	}
	return "error"
}
