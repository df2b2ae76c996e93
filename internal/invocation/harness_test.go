package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

const (
	testNamespace = "team-a"
	testName      = "files"
)

// testTools are the server's tools: mcptest's defaults plus "transfer", whose schema is strict.
func testTools() []*mcp.Tool {
	return append(mcptest.DefaultTools(), &mcp.Tool{
		Name:        "transfer",
		Description: "Transfer an amount.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1},"to":{"type":"string","maxLength":32}},"required":["amount","to"],"additionalProperties":false}`),
	})
}

// freeze lists srv's tools with a bare mcpclient session and drafts a reviewed profile document
// from them (every effect "read", except transfer "write").
func freeze(t testing.TB, url string) *apiv1.ProfileDocument {
	t.Helper()
	return freezeWith(t, url, nil)
}

// freezeWith is freeze with an HTTP client (nil: mcpclient's default).
func freezeWith(t testing.TB, url string, hc *http.Client) *apiv1.ProfileDocument {
	t.Helper()
	ctx := context.Background()
	s, err := mcpclient.NewClient(nil).Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url, HTTPClient: hc}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(snap)
	doc.Service.Ref, doc.Service.ConnectionRef = "files", "files"
	for i := range doc.Operations {
		doc.Operations[i].Effect = apiv1.EffectRead
		doc.Operations[i].Title = "Reviewed " + doc.Operations[i].RemoteName
		if doc.Operations[i].RemoteName == "transfer" {
			doc.Operations[i].Effect = apiv1.EffectWrite
		}
	}
	if err := ocipack.Validate(doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// deployment binds doc at url, exposing every operation except those named in hidden, activated
// on doc's snapshot.
func deployment(doc *apiv1.ProfileDocument, url string, hidden ...string) *apiv1.ServiceDeployment {
	dep := &apiv1.ServiceDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testName, Generation: 1},
		Spec: apiv1.ServiceDeploymentSpec{
			ProfileRef:    apiv1.LocalObjectReference{Name: "files"},
			ProviderID:    "files",
			MCPConnection: apiv1.MCPConnection{URL: url},
		},
	}
	for _, o := range doc.Operations {
		expose := true
		for _, h := range hidden {
			if h == o.OperationRef {
				expose = false
			}
		}
		dep.Spec.Operations = append(dep.Spec.Operations, apiv1.OperationBinding{
			OperationRef: o.OperationRef, EndpointRef: apiv1.EndpointRefMCPConnection,
			GrantRefs: []string{"agents-invoke"}, Expose: expose,
		})
	}
	activate(dep, doc)
	return dep
}

// activate sets the status the operator writes on activation of doc.
func activate(dep *apiv1.ServiceDeployment, doc *apiv1.ProfileDocument) {
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		panic(err)
	}
	dep.Status = apiv1.ServiceDeploymentStatus{
		ObservedGeneration:   dep.Generation,
		ActiveSnapshotDigest: doc.Snapshot.Digest,
		ProfileDigest:        pd,
		Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionTrue, Reason: "Activated", ObservedGeneration: dep.Generation,
			LastTransitionTime: metav1.Now(),
		}},
	}
}

// fakeAPIServer answers SubjectAccessReviews like RBAC with one RoleBinding: the users in allow
// may invoke servicedeployments/files in team-a (and nothing else). It records every review.
type fakeAPIServer struct {
	mu      sync.Mutex
	allow   map[string]bool
	reviews []authorizationv1.SubjectAccessReviewSpec
	fail    error
}

func (f *fakeAPIServer) client() client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sar, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.fail != nil {
				return f.fail
			}
			f.reviews = append(f.reviews, *sar.Spec.DeepCopy())
			ra := sar.Spec.ResourceAttributes
			sar.Status.Allowed = ra != nil && f.allow[sar.Spec.User] &&
				ra.Verb == "invoke" && ra.Group == "connectors.b10x.io" && ra.Resource == "servicedeployments" &&
				ra.Namespace == testNamespace && ra.Name == testName && ra.Subresource == ""
			if !sar.Status.Allowed {
				sar.Status.Reason = "no RBAC policy matched (apiserver prose that must not surface)"
			}
			return nil
		},
	}).Build()
}

func (f *fakeAPIServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reviews)
}

// fixture is one real server on loopback, its frozen profile, an activated deployment and a
// surface over the real egress port and mcpclient.
type fixture struct {
	srv  *mcptest.HTTPServer
	doc  *apiv1.ProfileDocument
	dep  *apiv1.ServiceDeployment
	api  *fakeAPIServer
	opts invocation.Options
	s    *invocation.Surface
}

var (
	alice   = invocation.Caller{User: "system:serviceaccount:team-a:agent", Groups: []string{"system:serviceaccounts"}, UID: "u-1", Seed: "serviceaccount:u-1"}
	mallory = invocation.Caller{User: "system:serviceaccount:team-b:other", UID: "u-2", Seed: "serviceaccount:u-2"}
)

// newFixture starts the server and builds a surface; opt may adjust the options.
func newFixture(t testing.TB, hidden []string, opt func(*invocation.Options)) *fixture {
	t.Helper()
	return newFixtureWith(t, testTools(), hidden, opt)
}

// newFixtureWith is newFixture with the server's tools.
func newFixtureWith(t testing.TB, tools []*mcp.Tool, hidden []string, opt func(*invocation.Options)) *fixture {
	t.Helper()
	srv := mcptest.StartHTTP(mcptest.NewServer("files", tools), mcptest.Modern)
	t.Cleanup(srv.Close)
	f := &fixture{srv: srv, api: &fakeAPIServer{allow: map[string]bool{alice.User: true}}}
	f.doc = freeze(t, srv.URL)
	f.dep = deployment(f.doc, srv.URL, hidden...)
	f.opts = invocation.Options{
		// Loopback is allowed explicitly for the test server; the hosted policy refuses it.
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: &invocation.SubjectAccessReviewer{Client: f.api.client()},
		Schemas:    invocation.NewSchemaCache(),
	}
	if opt != nil {
		opt(&f.opts)
	}
	s, err := invocation.NewSurface(f.doc, f.dep, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	f.s = s
	return f
}

// describe describes op on Connection "files" as caller, failing the test on error.
func (f *fixture) describe(t testing.TB, caller invocation.Caller, op string) *invocation.Description {
	t.Helper()
	d, err := f.s.Describe(context.Background(), caller, op, "files")
	if err != nil {
		t.Fatalf("describe %s: %v", op, err)
	}
	return d
}

// lease computes by hand the lease of op for seed on f's surface, from the reviewed document (an
// operation the document does not map is leased as a read of the remote tool of its name).
func (f *fixture) lease(t testing.TB, seed, op string) string {
	t.Helper()
	pd, err := ocipack.ProfileDigest(f.doc)
	if err != nil {
		t.Fatal(err)
	}
	in := invocation.LeaseInput{Snapshot: f.doc.Snapshot.Digest, Profile: pd, Seed: seed, Operation: op,
		RemoteName: op, Effect: apiv1.EffectRead, Connection: "files"}
	for _, m := range f.doc.Operations {
		if m.OperationRef == op {
			in.RemoteName, in.Effect = m.RemoteName, m.Effect
		}
	}
	l, err := invocation.Lease(in)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// refusal returns the refusal name of err ("" when it has none).
func refusal(err error) string {
	var r interface{ Refusal() string }
	if errors.As(err, &r) {
		return r.Refusal()
	}
	return ""
}

// loopbackOptions are the test options: the real egress port with loopback explicitly allowed,
// the real SubjectAccessReviewer against api.
func loopbackOptions(api *fakeAPIServer) invocation.Options {
	if api == nil {
		api = &fakeAPIServer{}
	}
	return invocation.Options{
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: &invocation.SubjectAccessReviewer{Client: api.client()},
		Schemas:    invocation.NewSchemaCache(),
	}
}
