package envtest

// User story: a ServiceDeployment written before the CRD refused URLs with userinfo.

import (
	"context"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// setURLValidations replaces the CEL rules of spec.mcpConnection.url (nil: none), as an older
// CRD without them would have.
func setURLValidations(t *testing.T, rules apiextensionsv1.ValidationRules) apiextensionsv1.ValidationRules {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Name: "servicedeployments.connectors.b10x.io"}, crd); err != nil {
		t.Fatal(err)
	}
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := schema.Properties["spec"]
	conn := spec.Properties["mcpConnection"]
	url := conn.Properties["url"]
	old := url.XValidations
	url.XValidations = rules
	conn.Properties["url"] = url
	spec.Properties["mcpConnection"] = conn
	schema.Properties["spec"] = spec
	if err := k8sClient.Update(ctx, crd); err != nil {
		t.Fatalf("update CRD: %v", err)
	}
	return old
}

// An operator upgraded connector-mcp: a deployment written earlier carries a password in its URL
// (the CRD of the time accepted it). The controller refuses it in the Bound stage naming the field
// and the refusal, never the password, and dials nothing; fixed (a query string is fine), it
// activates.
func TestStoryURLWithUserinfoWrittenBeforeTheRule(t *testing.T) {
	ns := newNamespace(t, "story-old-url")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	withPassword := strings.Replace(live.URL, "http://", "http://svc:hunter2@", 1)

	// The older CRD: no rule on the URL.
	rules := setURLValidations(t, nil)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			setURLValidations(t, rules)
		}
	}
	t.Cleanup(restore)
	if len(rules) != 3 {
		t.Fatalf("the installed CRD has %d rules on the URL, want 3 (scheme, userinfo, fragment)", len(rules))
	}
	sd := newDeployment(ns, "old", "old", "old-prod", withPassword, doc, nil, "agents-invoke")
	var err error
	if !pollUntil(pollInterval, storyTimeout, func() bool { err = k8sClient.Create(context.Background(), sd); return err == nil }) {
		t.Fatalf("the rule-less CRD never accepted the old object: %v", err)
	}
	// The upgrade installs the rule again: new writes of such a URL are refused at admission.
	restore()
	probe := newDeployment(ns, "probe", "old", "probe-prod", withPassword, doc, nil, "agents-invoke")
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		err = k8sClient.Create(context.Background(), probe)
		if err != nil && strings.Contains(err.Error(), "endpoint_userinfo") {
			return true
		}
		if err == nil {
			_ = k8sClient.Delete(context.Background(), probe)
			probe = newDeployment(ns, "probe", "old", "probe-prod", withPassword, doc, nil, "agents-invoke")
		}
		return false
	}) {
		t.Fatalf("the restored rule never took effect: %v", err)
	}

	op := startOperator(t, ns, devOptions())
	makeGrant(t, ns, "agents-invoke", "old")
	mustCreate(t, inlineProfile(ns, "old", doc))
	sd = waitObj(t, sd, storyTimeout, "refused by the controller", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonEndpointRefused)
	})
	msg := condOf(sd, apiv1.ConditionBound).Message
	if !strings.Contains(msg, controllers.RefusalEndpointUserinfo) || !strings.Contains(msg, "spec.mcpConnection.url") {
		t.Fatalf("Bound message = %q", msg)
	}
	if !hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonEndpointRefused) {
		t.Fatalf("not stalled: %s", describeStatus(sd))
	}
	if strings.Contains(mustJSON(t, sd.Status), "hunter2") {
		t.Fatal("status carries the password")
	}
	waitEvent(t, ns, "old", "Warning/"+apiv1.ReasonEndpointRefused)
	var evs eventsv1.EventList
	if err := k8sClient.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Note, "hunter2") {
			t.Fatalf("an event carries the password: %q", e.Note)
		}
	}
	// One more pass over the refused deployment (a label change): it still dials nothing.
	hitsBefore := live.hits.Load()
	passes := op.reconciles(ns + "/old")
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) { sd.Labels = map[string]string{"poke": "1"} })
	waitPasses(t, op, ns+"/old", passes, 1, deploymentController)
	if live.hits.Load() != hitsBefore {
		t.Fatal("the refused endpoint was dialed")
	}

	// Twin: the fixed URL (a query string is allowed) activates.
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) { sd.Spec.MCPConnection.URL = live.URL + "?tenant=a" })
	sd = waitObj(t, sd, storyTimeout, "Ready once fixed", isReady[*apiv1.ServiceDeployment])
	if sd.Status.ActiveSnapshotDigest != doc.Snapshot.Digest {
		t.Fatalf("active %q", sd.Status.ActiveSnapshotDigest)
	}
}
