package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/activation"
)

// stepRefusal is a verifier step's refusal, named like the pack verifier names its own steps.
type stepRefusal string

func (e stepRefusal) Error() string   { return "verifier: " + string(e) }
func (e stepRefusal) Refusal() string { return string(e) }

// refusingResolver answers every profile with one stage outcome.
type refusingResolver struct{ serr *activation.StageError }

func (f refusingResolver) Resolve(context.Context, *apiv1.McpServiceProfile) (*activation.Resolved, *activation.StageError) {
	return nil, f.serr
}

// A deployment the manager activated but whose profile does not verify in this gateway is not
// served; the registry retries a transient failure and a waiting refusal (a trust policy or key
// Secret its cache has not seen yet), not a refusal that needs a human.
func TestRegistryRetriesWaitingRefusals(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sd", Generation: 1},
		Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: "p"}},
		Status: apiv1.ServiceDeploymentStatus{ObservedGeneration: 1, ActiveSnapshotDigest: "sha256:00",
			Conditions: []metav1.Condition{{Type: apiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: apiv1.ReasonActivated}}}}
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sd, prof).Build()
	const retry = 7 * time.Second
	for _, tc := range []struct {
		name   string
		serr   *activation.StageError
		reason string
		want   time.Duration
	}{
		{"waiting", activation.ClassifyVerifyError(activation.VerifyRequest{}, stepRefusal(activation.StepNoTrustSource)), apiv1.ReasonUntrustedSigner, retry},
		{"transient", activation.ClassifyVerifyError(activation.VerifyRequest{}, errors.New("registry down")), apiv1.ReasonRegistryUnavailable, retry},
		{"refused", activation.ClassifyVerifyError(activation.VerifyRequest{}, stepRefusal(activation.StepPackReference)), apiv1.ReasonPackInvalid, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.serr.Reason() != tc.reason {
				t.Fatalf("classified %s, want %s", tc.serr.Reason(), tc.reason)
			}
			r := &Registry{Client: c, Resolver: refusingResolver{tc.serr}, RetryInterval: retry}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "sd"}})
			if err != nil || res.RequeueAfter != tc.want {
				t.Fatalf("requeue %v (%v), want %v", res.RequeueAfter, err, tc.want)
			}
			if _, ok := r.Lookup("ns", "sd"); ok {
				t.Fatal("a deployment whose profile does not verify is served")
			}
		})
	}
}

// A profile's event maps to exactly the deployments of its namespace that reference it, read
// through the ProfileRefIndex field index (not a listing of the whole namespace).
func TestRegistryByProfileUsesTheIndex(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := apiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dep := func(ns, name, profile string) *apiv1.ServiceDeployment {
		return &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: profile}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&apiv1.ServiceDeployment{}, ProfileRefIndex, profileRefOf).
		WithObjects(dep("ns", "a", "p"), dep("ns", "b", "p"), dep("ns", "c", "q"), dep("other", "d", "p")).Build()
	r := &Registry{Client: c}
	got := r.byProfile(context.Background(), &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	names := map[string]bool{}
	for _, req := range got {
		names[req.String()] = true
	}
	if len(got) != 2 || !names["ns/a"] || !names["ns/b"] {
		t.Fatalf("byProfile = %v, want ns/a and ns/b", got)
	}
	// Without the index the listing fails and maps to nothing: the index is what it reads.
	bare := &Registry{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(dep("ns", "a", "p")).Build()}
	if got := bare.byProfile(context.Background(), &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}); len(got) != 0 {
		t.Fatalf("byProfile without the index = %v", got)
	}
}
