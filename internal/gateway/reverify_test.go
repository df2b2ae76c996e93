package gateway

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// TestReverifierCreatesRequests: a re-verification is asked for with an McpReverifyRequest in
// the deployment's namespace naming it (no write on the ServiceDeployment, which the gateway
// may not patch), at most once per MinInterval per deployment.
func TestReverifierCreatesRequests(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, p, opts...)
		}}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	r := &Reverifier{Client: c, Clock: clk}
	key := types.NamespacedName{Namespace: "team", Name: "svc"}
	requests := func() []apiv1.McpReverifyRequest {
		var l apiv1.McpReverifyRequestList
		if err := c.List(context.Background(), &l, client.InNamespace("team")); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	if sent, err := r.Request(context.Background(), key); !sent || err != nil {
		t.Fatalf("first request: sent %v err %v", sent, err)
	}
	got := requests()
	if len(got) != 1 || got[0].Spec.DeploymentName != "svc" || got[0].Spec.Reason != apiv1.ReverifyReasonLiveDrift {
		t.Fatalf("requests = %+v", got)
	}
	if sent, _ := r.Request(context.Background(), key); sent {
		t.Fatal("a second request within MinInterval was sent")
	}
	clk.SetTime(clk.Now().Add(DefaultReverifyMinInterval))
	if sent, err := r.Request(context.Background(), key); !sent || err != nil || len(requests()) != 2 {
		t.Fatalf("after MinInterval: sent %v err %v requests %d", sent, err, len(requests()))
	}
	if patches != 0 {
		t.Fatalf("the reverifier patched %d object(s)", patches)
	}
}

// TestReverifierRefusedCreate is the twin: a create the apiserver refuses is an error (without
// the apiserver's text), and the next request is not held back by the failed one.
func TestReverifierRefusedCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	forbid := true
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if forbid {
				return apierrors.NewForbidden(schema.GroupResource{Group: "connectors.b10x.io", Resource: "mcpreverifyrequests"}, "", nil)
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	r := &Reverifier{Client: c}
	key := types.NamespacedName{Namespace: "team", Name: "svc"}
	if sent, err := r.Request(context.Background(), key); sent || err == nil {
		t.Fatalf("a refused create: sent %v err %v", sent, err)
	}
	forbid = false
	if sent, err := r.Request(context.Background(), key); !sent || err != nil {
		t.Fatalf("after the refusal cleared: sent %v err %v", sent, err)
	}
}
