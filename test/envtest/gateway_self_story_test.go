package envtest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/refusal"
)

// TestStoryDeploymentCannotTargetTheGateway (issue 21, item 9d): a tenant aims a
// ServiceDeployment at the gateway's own Service — its cluster IP, or the pod address its
// EndpointSlice publishes — to have the hosted route used recursively for outbound MCP. With
// --gateway-service set (as the chart sets it), the manager refuses both with
// destination_refused at the Bound stage, before any dial (the freeze never runs), even inside
// a range the namespace's ceiling and the deployment allow. Twin, without a dial (a deployment
// that passed Bound would be frozen, and its address is not loopback): the same bindings pass the
// Binder's check against this apiserver when the deny list does not name the gateway's Service.
//
// The apiserver refuses loopback addresses in EndpointSlices and cluster IPs outside the
// service range, so the gateway's endpoint here is a documentation address nothing answers; the
// counting-server proof that the dial-time check fires before a connection is
// internal/k8sbinding TestBinderDeniesTheGatewaysOwnService.
func TestStoryDeploymentCannotTargetTheGateway(t *testing.T) {
	ctx := context.Background()
	gwNS := newNamespace(t, "gwself-system")
	ns := newNamespace(t, "gwself")

	// The gateway's Service (cluster IP allocated by the apiserver) and its EndpointSlice.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "connector-mcp-gateway"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}
	mustCreate(t, svc)
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil || svc.Spec.ClusterIP == "" {
		t.Fatalf("the gateway Service has no cluster IP (%v)", err)
	}
	mustCreate(t, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: gwNS, Name: "connector-mcp-gateway-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.9"}}}})

	// The platform's ceiling for the namespace includes both the Service range and the range the
	// gateway's pod sits in, so nothing but the gateway rule refuses the pod address.
	tp := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-egress"},
		Spec: apiv1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Egress:            apiv1.TrustEgressCeiling{AllowedCIDRs: []string{"198.51.100.0/24", svc.Spec.ClusterIP + "/32"}},
		}}
	mustCreate(t, tp)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tp) })

	o := devOptions()
	o.GatewayService = gwNS + "/" + svc.Name
	startOperator(t, ns, o)

	legit := tenantCountingServer(t, "127.0.0.1:0")
	base := reviewedProfile(t, legit.URL+"/mcp")
	makeGrant(t, ns, "all")
	deploy := func(name, url string, allow ...string) *apiv1.ServiceDeployment {
		t.Helper()
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		mustCreate(t, inlineProfile(ns, name, doc))
		sd := newDeployment(ns, name, name, "p-"+name, url, doc, nil, "all")
		sd.Spec.MCPConnection.Egress.AllowCIDRs = allow
		mustCreate(t, sd)
		return sd
	}
	attempts := map[string]*apiv1.ServiceDeployment{
		"the gateway's cluster IP":     deploy("gw-cluster-ip", "https://"+svc.Spec.ClusterIP+":8443/mcp", svc.Spec.ClusterIP+"/32"),
		"the gateway's pod (endpoint)": deploy("gw-endpoint", "https://198.51.100.9:8443/mcp", "198.51.100.0/24"),
	}
	for what, sd := range attempts {
		sd = refusedWith(t, sd, apiv1.ReasonEndpointRefused)
		if !hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonEndpointRefused) {
			t.Errorf("%s: not refused by the Bound stage: %+v", what, sd.Status.Conditions)
		}
		if msg := condOf(sd, apiv1.ConditionReady).Message; !strings.Contains(msg, "destination_refused") {
			t.Errorf("%s: Ready message %q does not name destination_refused", what, msg)
		}
		if strings.Contains(mustJSON(t, sd.Status), gwNS) {
			t.Errorf("%s: the status names the gateway's namespace", what)
		}
	}

	// The twin: the Binder's check (no dial) on the pod address, with the manager's ceiling and a
	// deny list read from this apiserver, passes without the gateway's Service and is refused
	// with it. (The cluster IP lies in the Service range, denied either way.)
	ceilings := &k8sbinding.TrustPolicyCeilings{Reader: k8sClient}
	req := k8sbinding.Request{Namespace: ns, URL: "https://198.51.100.9:8443/mcp", AllowCIDRs: []string{"198.51.100.0/24"}}
	without := &k8sbinding.Binder{Ceilings: ceilings, Deny: &k8sbinding.APIServerDeny{Reader: k8sClient}}
	if err := without.Check(ctx, req); err != nil {
		t.Fatalf("without --gateway-service the pod address is refused too (%v): the story proves nothing", err)
	}
	with := &k8sbinding.Binder{Ceilings: ceilings, Deny: &k8sbinding.APIServerDeny{Reader: k8sClient,
		Services: []types.NamespacedName{{Namespace: gwNS, Name: svc.Name}}}}
	if err := with.Check(ctx, req); refusal.Name(err) != egress.RefusalDestination {
		t.Fatalf("with the gateway's Service: err = %v, want %s", err, egress.RefusalDestination)
	}
}
