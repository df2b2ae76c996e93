package adapters

import (
	"context"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient"
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

var _ activation.Freezer = (*Freezer)(nil)

// Freeze connects to req.URL through a fresh egress port bound to that endpoint, negotiates and
// lists every tool within bounds. Errors are mcpclient's and egress's own; a refusal of the
// binding is wrapped as the step activation.StepBinding (activation.ClassifyFreezeError
// classifies both).
func (f *Freezer) Freeze(ctx context.Context, req activation.FreezeRequest) (*snapshot.ToolSnapshot, error) {
	tr, err := f.Binder.Transport(ctx, BindingRequest(req))
	if err != nil {
		return nil, step(activation.StepBinding, err)
	}
	defer tr.CloseIdleConnections()
	cfg := mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: req.URL, HTTPClient: tr.HTTPClient()}, Limits: f.Limits}
	// Every freeze negotiates afresh: the era the server negotiates now is part of what is
	// compared with the review, so a remembered era must not stand in for it (and a wrong
	// verdict from one flaky negotiation must not outlive that freeze).
	f.Client.ForgetEra(cfg)
	sess, err := f.Client.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sess.Close() }()
	snap, err := sess.ListTools(ctx)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// BindingRequest is the k8sbinding request of a freeze.
func BindingRequest(req activation.FreezeRequest) k8sbinding.Request {
	b := k8sbinding.Request{Namespace: req.Namespace, URL: req.URL, AllowCIDRs: req.AllowCIDRs}
	if req.Credential != nil {
		b.Credential = &egress.CredentialRef{Name: req.Credential.Name, Key: req.Credential.Key}
	}
	if req.CABundle != nil {
		b.CABundle = &k8sbinding.CABundleRef{Name: req.CABundle.Name, Key: req.CABundle.Key}
	}
	return b
}
