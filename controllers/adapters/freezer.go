package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/snapshot"
)

// Freezer lists a deployment's live tools through egress with mcpclient.
type Freezer struct {
	// Client negotiates and remembers eras; share one per manager.
	Client *mcpclient.Client
	// Secrets reads credential Secrets by name (uncached reader).
	Secrets client.Reader
	// IP is the cluster's dial-time address policy (apiserver denied, cluster allow-list,
	// loopback only in development). A deployment's allowCIDRs are added to its AllowCIDRs.
	IP egress.IPPolicy
	// ExchangeTimeout bounds each HTTP exchange (zero: egress default).
	ExchangeTimeout time.Duration
	// MaxResponseBytes bounds each response body (zero: egress default).
	MaxResponseBytes int64
	// Limits are the MCP bounds (zero fields: mcpclient defaults).
	Limits mcpclient.Limits
}

var _ controllers.Freezer = (*Freezer)(nil)

// Freeze connects to req.URL through a fresh egress port bound to that endpoint, negotiates and
// lists every tool within bounds.
func (f *Freezer) Freeze(ctx context.Context, req controllers.FreezeRequest) (*snapshot.ToolSnapshot, error) {
	b := egress.Binding{URL: req.URL, AllowCIDRs: req.AllowCIDRs}
	if req.Credential != nil {
		b.Credential = &egress.CredentialRef{Name: req.Credential.Name, Key: req.Credential.Key}
		b.Secrets = egress.NewKubernetesSecretStore(f.Secrets, req.Namespace)
	}
	tr, err := egress.NewBindingTransport(egress.Policy{IP: f.IP, Timeout: f.ExchangeTimeout, MaxResponseBytes: f.MaxResponseBytes}, b)
	if err != nil {
		msg := "the endpoint is not acceptable to the egress policy: " + refusal(err)
		if errors.Is(err, egress.ErrInvalidPolicy) {
			msg = "the endpoint binding is not a valid egress policy (check mcpConnection.egress.allowCIDRs)"
		}
		return nil, &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonEndpointRefused, Err: err, Message: msg}
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

// classify maps a freeze error onto a stage outcome: named refusals of egress, mcpclient and
// snapshot need a human (FreezeRefused); a missing credential and transport failures are retried.
func classify(err error, where string) error {
	var cred *egress.CredentialError
	var dest *egress.DestinationError
	switch {
	case errors.As(err, &dest) && dest.Reason == "resolve":
		return &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonServerUnreachable, Transient: true, Err: err,
			Message: fmt.Sprintf("the host of %s does not resolve; retrying", where)}
	case errors.As(err, &cred):
		return &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonCredentialNotFound, Transient: true, Err: err,
			Message: fmt.Sprintf("the credential for %s is unavailable", where)}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, egress.ErrDeadlineExceeded),
		errors.Is(err, mcpclient.ErrCallTimeout), errors.Is(err, mcpclient.ErrProbeTimeout),
		errors.Is(err, mcpclient.ErrConnectionClosed), errors.Is(err, mcpclient.ErrHTTPStatus):
		return &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonServerUnreachable, Transient: true, Err: err,
			Message: fmt.Sprintf("%s did not answer the tool listing (%s); retrying", where, refusal(err))}
	}
	var named interface{ Refusal() string }
	if errors.As(err, &named) {
		return &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonFreezeRefused, Err: err,
			Message: fmt.Sprintf("the live tool listing of %s was refused: %s", where, refusal(err))}
	}
	return &controllers.StageError{Condition: controllers.TypeSnapshotFrozen, Reason: controllers.ReasonServerUnreachable, Transient: true, Err: err,
		Message: fmt.Sprintf("%s could not be reached; retrying", where)}
}

// refusal returns the stable refusal name of err (with the document path for ocipack
// refusals), or a word for the transport failures that carry none.
func refusal(err error) string {
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
