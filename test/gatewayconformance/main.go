// Command gatewayconformance serves a real gateway (gateway.Registry fed by the real reconcile
// path, gateway.Gateway) in front of a go-sdk upstream that has the tools the official MCP
// conformance suite's server scenarios call, for hack/gateway-conformance.sh. The suite sends no
// bearer token, so a front handler adds a fixed one that the harness's authenticator accepts; the
// gateway's own authentication and authorization paths are unchanged (both tested elsewhere with
// real TokenReviews and SubjectAccessReviews).
//
// It prints "URL <url>" on stdout when ready and serves until killed.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

const (
	namespace = "conformance"
	name      = "everything"
	token     = "conformance-harness-token" //nolint:gosec // G101: the harness's fixed test token, not a credential
)

// allow authenticates the harness token and authorizes everything.
type allow struct{}

func (allow) Authenticate(_ context.Context, t string) (invocation.Caller, error) {
	if t != token {
		return invocation.Caller{}, &gateway.AuthError{Err: gateway.ErrUnauthenticated}
	}
	return invocation.Caller{User: "system:serviceaccount:conformance:suite", UID: "suite", Seed: "uid:suite"}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayconformance:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var lc net.ListenConfig
	upLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := mcptest.NewConformanceServer()
	go func() {
		upSrv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
			Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, &mcp.StreamableHTTPOptions{Stateless: true})}
		_ = upSrv.Serve(upLn)
	}()
	upURL := "http://" + upLn.Addr().String() + "/mcp"

	// Review: freeze the upstream and map every tool to an operation of the same name ("read").
	sess, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: upURL}})
	if err != nil {
		return err
	}
	snap, err := sess.ListTools(ctx)
	_ = sess.Close()
	if err != nil {
		return err
	}
	doc := ocipack.Draft(snap)
	doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
	for i := range doc.Operations {
		op := &doc.Operations[i]
		op.Effect, op.Title, op.Description = apiv1.EffectRead, "Reviewed "+op.RemoteName, "Reviewed description of "+op.RemoteName
	}
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return err
	}
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "p", Generation: 1},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{Inline: doc}}}
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "d", Generation: 1},
		Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: name}, ProviderID: name, MCPConnection: apiv1.MCPConnection{URL: upURL}},
		Status: apiv1.ServiceDeploymentStatus{ObservedGeneration: 1, ActiveSnapshotDigest: doc.Snapshot.Digest, ProfileDigest: pd,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Activated", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}}}
	for _, op := range doc.Operations {
		sd.Spec.Operations = append(sd.Spec.Operations, apiv1.OperationBinding{OperationRef: op.OperationRef, EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{"g"}, Expose: true})
	}
	scheme := runtime.NewScheme()
	if err := apiv1.AddToScheme(scheme); err != nil {
		return err
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(prof, sd).WithStatusSubresource(sd).Build()
	authz := invocation.AuthorizerFunc(func(context.Context, invocation.Caller, invocation.Target) (bool, error) { return true, nil })
	reg := &gateway.Registry{Client: c, Resolver: &activation.Resolver{}, Log: logr.Discard(), Surface: invocation.Options{
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: authz}}
	if _, err := reg.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}); err != nil {
		return err
	}
	if _, ok := reg.Lookup(namespace, name); !ok {
		return fmt.Errorf("the deployment is not served")
	}
	gw, err := gateway.New(gateway.Config{Registry: reg, Authenticator: allow{}, Authorizer: authz, Log: logr.Discard()})
	if err != nil {
		return err
	}
	h := gw.Handler()
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(w, r)
	})
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("URL http://%s/mcp/%s/%s\n", ln.Addr(), namespace, name)
	<-ctx.Done()
	return srv.Close()
}
