package envtest

// User stories of refusals and recoveries: bindings, grants, collisions, credentials, an
// unreachable or hung server, the cluster's provenance and loopback policy.

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// refusedWith waits for Ready False with reason and returns the object.
func refusedWith[T interface {
	*apiv1.ServiceDeployment | *apiv1.McpServiceProfile
	clientObject
}](t *testing.T, obj T, reason string) T {
	t.Helper()
	return waitObj(t, obj, storyTimeout, "Ready False "+reason, func(o T) bool {
		return hasCondition(o, apiv1.ConditionReady, metav1.ConditionFalse, reason)
	})
}

// A deployment whose grant, endpoint or credential reference is wrong is not Bound, says why,
// never dials its endpoint, and reads as Failed to GitOps tools; fixing the grant activates it.
func TestStoryBindingRefusals(t *testing.T) {
	ns := newNamespace(t, "story-bind")
	startOperator(t, ns, devOptions())
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	base := reviewedProfile(t, live.URL)
	// One profile (and Connection) per deployment, so that only the binding under test differs.
	profile := func(name string) *apiv1.ProfileDocument {
		d := base.DeepCopy()
		d.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		mustCreate(t, inlineProfile(ns, name, d))
		return d
	}
	mustCreate(t, newSecret(ns, "tok", "token", "v1"))
	cred := &apiv1.CredentialRef{Name: "tok", Key: "token"}
	hits := live.hits.Load()

	// Missing grant: refused, then granted.
	missing := newDeployment(ns, "missing-grant", "missing-grant", "p1", live.URL, profile("missing-grant"), cred, "later")
	mustCreate(t, missing)
	// The RoleBinding might still arrive (waiting): Stalled once the grace period has passed.
	missing = waitObj(t, missing, storyTimeout, "Stalled GrantNotFound", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonGrantNotFound)
	})
	if !hasCondition(missing, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonGrantNotFound) ||
		!strings.Contains(condOf(missing, apiv1.ConditionBound).Message, `"later"`) || kstatusOf(t, missing) != status.FailedStatus {
		t.Fatalf("missing grant: %+v kstatus %s", missing.Status.Conditions, kstatusOf(t, missing))
	}

	// A grant whose role allows another deployment only.
	makeGrant(t, ns, "other-only", "someone-else")
	denied := newDeployment(ns, "denied", "denied", "p2", "http://127.0.0.2:1/x", profile("denied"), cred, "other-only")
	mustCreate(t, denied)
	refusedWith(t, denied, apiv1.ReasonGrantDenied)

	makeGrant(t, ns, "all")
	wrongEndpoint := newDeployment(ns, "wrong-endpoint", "wrong-endpoint", "p3", "http://127.0.0.3:1/x", profile("wrong-endpoint"), cred, "all")
	wrongEndpoint.Spec.Operations[0].EndpointRef = "somewhere_else"
	mustCreate(t, wrongEndpoint)
	refusedWith(t, wrongEndpoint, apiv1.ReasonEndpointRefInvalid)

	wrongCred := newDeployment(ns, "wrong-cred", "wrong-cred", "p4", "http://127.0.0.4:1/x", profile("wrong-cred"), cred, "all")
	wrongCred.Spec.Operations[1].CredentialRef = &apiv1.CredentialRef{Name: "tok", Key: "other"}
	mustCreate(t, wrongCred)
	refusedWith(t, wrongCred, apiv1.ReasonCredentialRefMismatch)

	if got := live.hits.Load() - hits; got != 0 {
		t.Fatalf("unbound deployments sent %d requests to the MCP server", got)
	}

	// The missing grant appears: the RoleBinding watch re-checks and the deployment activates.
	makeGrant(t, ns, "later", "missing-grant")
	waitObj(t, missing, storyTimeout, "Ready after the grant appeared", isReady[*apiv1.ServiceDeployment])
}

// Two deployments claim the same endpoint: the first keeps it, the second is refused naming the
// first, and takes over when the first is deleted.
func TestStoryCollisionFirstComeKeepsIt(t *testing.T) {
	ns := newNamespace(t, "story-collide")
	startOperator(t, ns, devOptions())
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	first := newDeployment(ns, "first", "svc", "provider-a", live.URL, doc, nil, "all")
	mustCreate(t, first)
	first = waitObj(t, first, storyTimeout, "first Ready", isReady[*apiv1.ServiceDeployment])
	waitNextSecond(t, first.CreationTimestamp) // creation timestamps have second resolution

	second := newDeployment(ns, "second", "svc", "provider-b", strings.Replace(live.URL, "127.0.0.1", "127.0.0.1", 1), doc, nil, "all")
	mustCreate(t, second)
	second = refusedWith(t, second, apiv1.ReasonAuthorityCollision)
	if msg := condOf(second, apiv1.ConditionBound).Message; !strings.Contains(msg, ns+"/first") {
		t.Fatalf("the refusal does not name the holder: %q", msg)
	}
	// Same provider identity on another endpoint: refused too, naming the holder.
	third := newDeployment(ns, "third", "svc", "provider-a", "http://127.0.0.5:1/mcp", doc, nil, "all")
	mustCreate(t, third)
	third = refusedWith(t, third, apiv1.ReasonProviderCollision)
	if msg := condOf(third, apiv1.ConditionBound).Message; !strings.Contains(msg, ns+"/first") {
		t.Fatalf("the refusal does not name the holder: %q", msg)
	}
	if !isReady(waitObj(t, first, time.Second, "first", func(*apiv1.ServiceDeployment) bool { return true })) {
		t.Fatal("the holder lost its claim")
	}

	if err := k8sClient.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitObj(t, second, storyTimeout, "second Ready after the holder left", isReady[*apiv1.ServiceDeployment])
}

// The credential Secret is missing (retried, not stalled), then created (activates), then
// rotated: the new hash is recorded and the new bearer is what the server receives.
func TestStoryCredentialMissingThenRotated(t *testing.T) {
	ns := newNamespace(t, "story-cred")
	o := devOptions()
	o.ReverifyInterval, o.ReverifyJitter = time.Second, 0
	startOperator(t, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	var mu sync.Mutex
	var bearers []string
	live := startSwitchable(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bearers = append(bearers, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	lastBearer := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(bearers) == 0 {
			return ""
		}
		return bearers[len(bearers)-1]
	}
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	cred := &apiv1.CredentialRef{Name: "tok", Key: "token"}
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, cred, "all")
	mustCreate(t, sd)
	sd = refusedWith(t, sd, apiv1.ReasonCredentialNotFound)
	if !hasCondition(sd, apiv1.ConditionReconciling, metav1.ConditionTrue, apiv1.ReasonCredentialNotFound) ||
		hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, "") || kstatusOf(t, sd) != status.InProgressStatus {
		t.Fatalf("missing secret: %+v kstatus %s", sd.Status.Conditions, kstatusOf(t, sd))
	}

	sec := newSecret(ns, "tok", "token", "bearer-one")
	mustCreate(t, sec)
	sd = waitObj(t, sd, storyTimeout, "Ready with the credential", isReady[*apiv1.ServiceDeployment])
	hash1 := sd.Status.CredentialHash
	if lastBearer() != "Bearer bearer-one" {
		t.Fatalf("the server saw Authorization %q", lastBearer())
	}
	mutate(t, sec, func(s *corev1Secret) { s.Data["token"] = []byte("bearer-two") })
	sd = waitObj(t, sd, storyTimeout, "rotation noticed", func(sd *apiv1.ServiceDeployment) bool {
		return isReady(sd) && sd.Status.CredentialHash != "" && sd.Status.CredentialHash != hash1
	})
	if lastBearer() != "Bearer bearer-two" {
		t.Fatalf("after rotation the server saw Authorization %q", lastBearer())
	}
	if strings.Contains(mustJSON(t, sd), "bearer-") {
		t.Fatal("a credential value reached the deployment object")
	}
}

// The server is unreachable: Ready False with a retry (Reconciling, kstatus InProgress), never
// Stalled; when it comes up the retry activates the deployment.
func TestStoryServerUnreachableIsRetried(t *testing.T) {
	ns := newNamespace(t, "story-down")
	o := devOptions()
	// A negotiation racing the server's start can see the legacy era (mcpclient falls back to
	// initialize when the discover probe's connection fails); that is drift until the next
	// re-verification negotiates afresh.
	o.ReverifyInterval, o.ReverifyJitter = time.Second, 0
	startOperator(t, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	up := startSwitchable(t, h)
	doc := reviewedProfile(t, up.URL)

	lc := &net.ListenConfig{}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	url := "http://" + addr + "/mcp"
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", url, doc, nil, "all")
	mustCreate(t, sd)
	sd = refusedWith(t, sd, apiv1.ReasonServerUnreachable)
	if !hasCondition(sd, apiv1.ConditionReconciling, metav1.ConditionTrue, apiv1.ReasonServerUnreachable) ||
		hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, "") || kstatusOf(t, sd) != status.InProgressStatus {
		t.Fatalf("unreachable: %+v kstatus %s", sd.Status.Conditions, kstatusOf(t, sd))
	}
	if msg := condOf(sd, apiv1.ConditionReady).Message; strings.Contains(msg, "refused") && strings.Contains(msg, "dial") {
		t.Fatalf("the condition carries a raw transport error: %q", msg)
	}

	ln, err = lc.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err) // the recovery half needs the same port
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	defer srv.Close()
	waitObj(t, sd, storyTimeout, "Ready after the server came up", isReady[*apiv1.ServiceDeployment])
}

// Deleting a deployment while its server hangs mid-freeze completes at once (nothing external
// needs cleanup, so there is no finalizer), and the manager still stops within its graceful
// shutdown timeout (checked by startOperator's cleanup) with the freeze in flight.
func TestStoryDeletionWithHungServer(t *testing.T) {
	ns := newNamespace(t, "story-hung")
	o := devOptions()
	o.FreezeTimeout, o.ExchangeTimeout = 20*time.Second, 20*time.Second
	startOperator(t, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	entered, stop := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // runs before the server's Close, which waits for handlers
	live.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "all")
	mustCreate(t, sd)
	select {
	case <-entered:
	case <-time.After(storyTimeout):
		t.Fatal("the freeze never reached the server")
	}
	if err := k8sClient.Delete(context.Background(), sd); err != nil {
		t.Fatal(err)
	}
	var err error
	if !pollUntil(50*time.Millisecond, storyTimeout, func() bool {
		err = k8sClient.Get(context.Background(), objKey(sd), &apiv1.ServiceDeployment{})
		return apierrors.IsNotFound(err)
	}) {
		t.Fatalf("the deployment was not deleted while its server hung (err %v)", err)
	}
}

// With the production default (provenance required), an inline profile is refused and its
// deployment never activates nor dials.
func TestStoryInlineRefusedWhenProvenanceRequired(t *testing.T) {
	ns := newNamespace(t, "story-prov")
	o := devOptions()
	o.SkipProvenanceUnsafe = false
	startOperator(t, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	hits := live.hits.Load()
	makeGrant(t, ns, "all")
	prof := inlineProfile(ns, "svc", doc)
	mustCreate(t, prof)
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "all")
	mustCreate(t, sd)
	prof = refusedWith(t, prof, apiv1.ReasonInlineSourceRefused)
	if !hasCondition(prof, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonInlineSourceRefused) ||
		prof.Status.SnapshotDigest != "" || kstatusOf(t, prof) != status.FailedStatus {
		t.Fatalf("profile: %+v kstatus %s", prof.Status, kstatusOf(t, prof))
	}
	// The deployment may first see the profile not yet verified (waiting, InProgress); once the
	// profile is refused it is refused too (Stalled, Failed).
	sd = waitObj(t, sd, storyTimeout, "Stalled ProfileNotReady", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonProfileNotReady)
	})
	if !hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonProfileNotReady) ||
		kstatusOf(t, sd) != status.FailedStatus || live.hits.Load() != hits {
		t.Fatalf("deployment kstatus %s, %d requests to the server", kstatusOf(t, sd), live.hits.Load()-hits)
	}
}

// Without the development flag the egress port refuses loopback endpoints: the deployment is
// refused (Stalled) and the server receives nothing.
func TestStoryLoopbackRefusedWithoutDevelopmentFlag(t *testing.T) {
	ns := newNamespace(t, "story-loop")
	o := devOptions()
	o.AllowLoopbackUnsafe = false
	startOperator(t, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	hits := live.hits.Load()
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "all")
	mustCreate(t, sd)
	sd = waitObj(t, sd, storyTimeout, "egress refusal", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, "")
	})
	if r := condOf(sd, apiv1.ConditionReady).Reason; r != apiv1.ReasonEndpointRefused && r != apiv1.ReasonFreezeRefused {
		t.Fatalf("Ready reason %s: %+v", r, sd.Status.Conditions)
	}
	if live.hits.Load() != hits {
		t.Fatal("the loopback server was reached")
	}
}
