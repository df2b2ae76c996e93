package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

// A consumer's path once a ServiceDeployment is Ready: build the surface from the verified
// profile document and the activated deployment, describe an operation (facts + lease), invoke
// it. The server here is a loopback test server, so the egress policy allows loopback
// explicitly; the authorizer stands in for the apiserver (production: SubjectAccessReviewer).
func Example() {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", mcptest.DefaultTools()), mcptest.Modern)
	defer srv.Close()
	ctx := context.Background()

	// What the operator holds after activation: the reviewed profile and the deployment.
	sess, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: srv.URL}})
	if err != nil {
		panic(err)
	}
	snap, err := sess.ListTools(ctx)
	_ = sess.Close()
	if err != nil {
		panic(err)
	}
	doc := ocipack.Draft(snap)
	for i := range doc.Operations {
		doc.Operations[i].Effect = apiv1.EffectRead
	}
	profileDigest, err := ocipack.ProfileDigest(doc)
	if err != nil {
		panic(err)
	}
	dep := &apiv1.ServiceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "files", Generation: 1},
		Spec: apiv1.ServiceDeploymentSpec{
			MCPConnection: apiv1.MCPConnection{URL: srv.URL},
			Operations: []apiv1.OperationBinding{
				{OperationRef: "add", EndpointRef: "mcp_connection", GrantRefs: []string{"agents"}, Expose: true},
				{OperationRef: "echo", EndpointRef: "mcp_connection", GrantRefs: []string{"agents"}}, // hidden
			},
		},
		Status: apiv1.ServiceDeploymentStatus{
			ObservedGeneration: 1, ActiveSnapshotDigest: snap.Digest, ProfileDigest: profileDigest,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Activated"}},
		},
	}

	surface, err := invocation.NewSurface(doc, dep, invocation.Options{
		Connector: &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: invocation.AuthorizerFunc(func(_ context.Context, c invocation.Caller, t invocation.Target) (bool, error) {
			return c.User == "system:serviceaccount:team-a:agent" && t == invocation.Target{Namespace: "team-a", Name: "files"}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	defer surface.Close()

	agent := invocation.Caller{User: "system:serviceaccount:team-a:agent", Seed: "serviceaccount:0b5e"}
	d, err := surface.Describe(ctx, agent, "add", "files")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Operation, d.Effect, string(d.InputSchema))

	res, err := surface.Invoke(ctx, invocation.Request{
		Caller: agent, Lease: d.Lease, Operation: "add", Connection: "files",
		Arguments: json.RawMessage(`{"a":2,"b":40}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.JSON))

	// Refusals are named: a hidden operation, a lease for another caller, bad arguments.
	_, err = surface.Describe(ctx, agent, "echo", "files")
	fmt.Println(errors.Is(err, invocation.ErrNotExposed), err)
	other := agent
	other.Seed = "serviceaccount:77aa"
	_, err = surface.Invoke(ctx, invocation.Request{Caller: other, Lease: d.Lease, Operation: "add", Connection: "files"})
	fmt.Println(err)
	_, err = surface.Invoke(ctx, invocation.Request{Caller: agent, Lease: d.Lease, Operation: "add", Connection: "files",
		Arguments: json.RawMessage(`{"a":"two"}`)})
	fmt.Println(err)
	// Output:
	// add read {"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}
	// {"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"files","version":"1.0.0"}},"content":[{"type":"text","text":"42"}],"resultType":"complete"}
	// true invocation: "echo": refused: not_exposed
	// invocation: "add": refused: stale_lease
	// invocation: "add": refused: invalid_arguments (at "/a": type)
}
