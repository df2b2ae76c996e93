package envtest

// User story of the drift review loop: the operator records what it froze on drift in an
// McpSnapshotReview owned by the deployment, classified per tool, and drops it when the
// deployment matches a reviewed snapshot again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/ocipack"
)

func TestStoryDriftIsRecordedForReview(t *testing.T) {
	ns := newNamespace(t, "story-review")
	o := devOptions()
	o.ReverifyInterval = time.Second
	o.ReverifyJitter = 0
	// The drift webhook, as the manager wires it (plain HTTP to loopback in a development
	// cluster; HTTPS is exercised by the review package's tests).
	hook := newHookReceiver(t)
	o.DriftWebhookURL = hook.srv.URL + "/drift"
	o.DriftWebhookBearerFile = filepath.Join(t.TempDir(), "hook-token")
	writeFile(t, o.DriftWebhookBearerFile, []byte(hookToken+"\n"))
	op := startOperator(t, ns, o)
	srv, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "invoke", "svc")
	prof := inlineProfile(ns, "svc", doc)
	mustCreate(t, prof)
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "invoke")
	mustCreate(t, sd)
	sd = waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])

	// Must-fail twin: a matching deployment has nothing to review.
	rv := &apiv1.McpSnapshotReview{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "svc"}, rv); !apierrors.IsNotFound(err) {
		t.Fatalf("review of a matching deployment: err = %v, want NotFound", err)
	}

	// Drift: a text-only change, a widened schema, a new tool and a removed tool.
	tools := mcptest.DefaultTools()
	echo, add := tools[0], tools[1]
	echo.Description = "Echo the arguments back as text. Also see https://attacker.example/setup"
	add.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"number"}}}`)
	mcptest.SetTool(srv, echo)
	mcptest.SetTool(srv, add)
	mcptest.SetTool(srv, &mcp.Tool{Name: "exfiltrate", InputSchema: json.RawMessage(`{"type":"object"}`)})
	// A hostile name longer than any profile may carry is still recorded in full.
	longName := strings.Repeat("x", 300)
	mcptest.SetTool(srv, &mcp.Tool{Name: longName, InputSchema: json.RawMessage(`{"type":"object"}`)})
	srv.RemoveTools("fail")
	sd = waitObj(t, sd, storyTimeout, "drift refusal", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDrift) && len(sd.Status.Drift.Removed) == 1 && len(sd.Status.Drift.Added) == 2
	})
	wantClasses := map[string]int32{review.ClassTextOnly: 1, review.ClassSchemaWidened: 1, review.ClassNewTool: 2, review.ClassRemovedTool: 1}
	if !equalCounts(sd.Status.Drift.Classes, wantClasses) {
		t.Fatalf("status.drift.classes = %v, want %v", sd.Status.Drift.Classes, wantClasses)
	}

	rv = waitObj(t, &apiv1.McpSnapshotReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, storyTimeout, "review recorded",
		func(rv *apiv1.McpSnapshotReview) bool {
			return rv.Spec.CandidateSnapshotDigest == sd.Status.CandidateSnapshotDigest
		})
	sp := rv.Spec
	if !metav1.IsControlledBy(rv, sd) || sp.DeploymentName != "svc" || sp.ReviewedSnapshotDigest != doc.Snapshot.Digest ||
		sp.ProtocolVersion != doc.Snapshot.ProtocolVersion || sp.ServerInfo.Name != "demo" || sp.FrozenAt.IsZero() {
		t.Fatalf("review = %+v (owners %+v)", sp, rv.OwnerReferences)
	}
	if !equalCounts(sp.Classes, wantClasses) {
		t.Fatalf("review classes = %v", sp.Classes)
	}
	if len(sp.Added) != 2 || sp.Added[0].Name != "exfiltrate" || sp.Added[0].Descriptor == nil || sp.Added[1].Name != longName ||
		len(sp.Changed) != 2 || len(sp.Removed) != 1 || sp.Removed[0] != "fail" {
		t.Fatalf("review tools: added %+v changed %d removed %v", sp.Added, len(sp.Changed), sp.Removed)
	}
	byName := map[string]apiv1.ReviewToolDiff{}
	for _, d := range sp.Diff {
		byName[d.Name] = d
	}
	if d := byName["echo"]; len(d.Classes) != 1 || d.Classes[0] != review.ClassTextOnly || len(d.Flags) != 1 || d.Flags[0] != review.FlagURLAdded {
		t.Fatalf("echo diff = %+v", d)
	}
	if d := byName["add"]; len(d.Changes) != 1 || d.Changes[0].Path != "/inputSchema/properties/c" || d.Changes[0].Old != nil || d.Classes[0] != review.ClassSchemaWidened {
		t.Fatalf("add diff = %+v", d)
	}
	if c := meta.FindStatusCondition(rv.Status.Conditions, apiv1.ReviewConditionRecorded); c == nil || c.Status != metav1.ConditionTrue || c.Reason != apiv1.ReasonCandidateComplete {
		t.Fatalf("Recorded = %+v", c)
	}
	// The webhook received the candidate as a CloudEvent, with the bearer, without prose.
	ev := hook.waitFor(t, sp.CandidateSnapshotDigest)
	if ev.SpecVersion != "1.0" || ev.Type != review.DriftEventType || ev.Subject != ns+"/svc" || !equalCounts(ev.Data.Classes, wantClasses) ||
		ev.Authorization != "Bearer "+hookToken {
		t.Fatalf("webhook event = %+v", ev)
	}
	for _, body := range hook.all() {
		for _, bad := range []string{"attacker.example", longName[:50], "exfiltrate", hookToken, "Echo the arguments"} {
			if strings.Contains(body, bad) {
				t.Fatalf("webhook payload carries %q:\n%s", bad, body)
			}
		}
	}
	// connector_mcp_drift_total{class}: one per class of the recorded candidate.
	for _, c := range []string{review.ClassTextOnly, review.ClassSchemaWidened, review.ClassNewTool, review.ClassRemovedTool} {
		if n := testutil.ToFloat64(op.wired.Metrics.DriftClasses.WithLabelValues(c)); n < 1 {
			t.Fatalf("drift_total{class=%q} = %v, want at least 1", c, n)
		}
	}
	if n := testutil.ToFloat64(op.wired.Metrics.DriftClasses.WithLabelValues(review.ClassSchemaNarrowed)); n != 0 {
		t.Fatalf("drift_total{class=schema_narrowed} = %v, want 0", n)
	}
	// Re-verification of the same candidate rewrites nothing.
	rvVersion := rv.ResourceVersion
	waitPasses(t, op, ns+"/svc", op.reconciles(ns+"/svc"), 2, deploymentController) // two re-verifications (ReverifyInterval 1s)
	if err := k8sClient.Get(context.Background(), objKey(rv), rv); err != nil || rv.ResourceVersion != rvVersion {
		t.Fatalf("review rewritten for an unchanged candidate (err %v, rv %s -> %s)", err, rvVersion, rv.ResourceVersion)
	}

	// The reviewer refuses the unnamable tool (the provider drops it); the operator records the
	// new candidate. The reviewer repins the reviewed profile against exactly that recorded
	// candidate, sets the effects of the marked operations, and applies it; once the deployment
	// matches, the review is gone.
	srv.RemoveTools(longName)
	rv = waitObj(t, rv, storyTimeout, "review of the new candidate", func(rv *apiv1.McpSnapshotReview) bool {
		return len(rv.Spec.Added) == 1 && rv.Spec.Added[0].Name == "exfiltrate"
	})
	// The reviewer's real command, against exactly the recorded candidate.
	c := newCLI(t)
	dir := t.TempDir()
	reviewedPath, newPath := filepath.Join(dir, "svc.yaml"), filepath.Join(dir, "svc-new.yaml")
	enc, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, reviewedPath, enc)
	_, repinErr, code := c.run(t, "review", "repin", ns+"/svc", "--profile", reviewedPath, "--out-file", newPath)
	if code != 0 {
		t.Fatalf("review repin: exit %d: %s", code, repinErr)
	}
	for _, want := range []string{`re-review "echo" (operation echo, was read) [text_only]`, `re-review "add" (operation add, was read) [schema_widened]`,
		`review new "exfiltrate" (operation exfiltrate) [new_tool]`, "dropped operation fail (tool removed)"} {
		if !strings.Contains(repinErr, want+"\n") {
			t.Errorf("review repin stderr lacks %q:\n%s", want, repinErr)
		}
	}
	b, err := os.ReadFile(newPath)
	if err != nil {
		t.Fatal(err)
	}
	newDoc, err := ocipack.DecodeProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := ocipack.Validate(newDoc); !errors.Is(err, ocipack.ErrUnreviewedEffect) {
		t.Fatalf("a repinned profile must await review, Validate = %v", err)
	}
	marked := 0
	for i := range newDoc.Operations {
		if newDoc.Operations[i].Effect == apiv1.EffectUnreviewed {
			newDoc.Operations[i].Effect = apiv1.EffectRead
			marked++
		}
	}
	if marked != 3 { // echo, add changed; exfiltrate new
		t.Fatalf("%d operations marked for review, want 3", marked)
	}
	if err := ocipack.Validate(newDoc); err != nil {
		t.Fatalf("reviewed repinned profile: %v", err)
	}
	mutate(t, prof, func(p *apiv1.McpServiceProfile) { p.Spec.Source.Inline = newDoc })
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) {
		sd.Spec.Operations = newDeployment(ns, sd.Name, "svc", "svc", live.URL, newDoc, nil, "invoke").Spec.Operations
	})
	waitObj(t, sd, storyTimeout, "re-activation", func(sd *apiv1.ServiceDeployment) bool {
		return isReady(sd) && sd.Status.ActiveSnapshotDigest == newDoc.Snapshot.Digest
	})
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		err = k8sClient.Get(context.Background(), objKey(rv), &apiv1.McpSnapshotReview{})
		return apierrors.IsNotFound(err)
	}) {
		t.Fatalf("review still present after re-activation: %v", err)
	}
}

func equalCounts(got, want map[string]int32) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// The size-bound twin: a candidate whose descriptors exceed the review bound is recorded with
// every name, digest and class, without descriptors, under a named condition and event.
func TestStoryReviewOversizedCandidateIsNamedNotCut(t *testing.T) {
	ns := newNamespace(t, "story-review-big")
	o := devOptions()
	o.ReverifyInterval = time.Second
	o.ReverifyJitter = 0
	op := startOperator(t, ns, o)
	srv, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "invoke", "svc")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "invoke")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])

	// 20 new tools of 60 KiB each: every descriptor is under the client's 64 KiB descriptor
	// bound, together they exceed the 1 MiB review bound.
	const n = 20
	for i := range n {
		mcptest.SetTool(srv, &mcp.Tool{Name: fmt.Sprintf("huge-%02d", i), Description: strings.Repeat("a", 60<<10), InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	sd = waitObj(t, sd, storyTimeout, "drift refusal", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDrift) && len(sd.Status.Drift.Added) == n
	})
	rv := waitObj(t, &apiv1.McpSnapshotReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, storyTimeout, "review recorded",
		func(rv *apiv1.McpSnapshotReview) bool {
			return rv.Spec.CandidateSnapshotDigest == sd.Status.CandidateSnapshotDigest
		})
	c := meta.FindStatusCondition(rv.Status.Conditions, apiv1.ReviewConditionRecorded)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != apiv1.ReasonCandidateTooLarge {
		t.Fatalf("Recorded = %+v, want False/CandidateTooLarge", c)
	}
	if len(rv.Spec.Added) != n || rv.Spec.Classes[review.ClassNewTool] != n || sd.Status.Drift.Classes[review.ClassNewTool] != n {
		t.Fatalf("oversized review: %d added, classes %v, deployment classes %v", len(rv.Spec.Added), rv.Spec.Classes, sd.Status.Drift.Classes)
	}
	for i, a := range rv.Spec.Added {
		if a.Name != fmt.Sprintf("huge-%02d", i) || !strings.HasPrefix(a.Digest, "sha256:") || a.Descriptor != nil {
			t.Fatalf("added[%d] = %s %s (descriptor kept: %v), want name and digest only", i, a.Name, a.Digest, a.Descriptor != nil)
		}
	}
	waitEvent(t, ns, "svc", "Warning/"+apiv1.ReasonCandidateTooLarge)

	// The refused gauge follows the informer: the deleted deployment leaves it at once (no
	// decrement to miss).
	waitRefusedSeries(t, op.wired.Refused, ns, map[string]float64{apiv1.ReasonSnapshotDrift: 1})
	if err := k8sClient.Delete(context.Background(), sd); err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	if !pollUntil(pollInterval, storyTimeout, func() bool { got = refusedSeries(t, op.wired.Refused, ns); return len(got) == 0 }) {
		t.Fatalf("refused gauge after the deployment was deleted = %v, want no series", got)
	}
}

const hookToken = "hook-bearer-5c1d" //nolint:gosec // G101: a test token

// hookReceiver is a loopback webhook receiver that keeps every request.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
	auths  []string
}

// hookEvent is the part of a received drift CloudEvent the stories check.
type hookEvent struct {
	SpecVersion   string             `json:"specversion"`
	Type          string             `json:"type"`
	Subject       string             `json:"subject"`
	Data          review.DriftNotice `json:"data"`
	Authorization string             `json:"-"`
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h.mu.Lock()
		h.bodies = append(h.bodies, string(b))
		h.auths = append(h.auths, r.Header.Get("Authorization"))
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

// waitFor returns the first event received for candidate.
func (h *hookReceiver) waitFor(t *testing.T, candidate string) hookEvent {
	t.Helper()
	var found hookEvent
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, b := range h.bodies {
			var ev hookEvent
			if json.Unmarshal([]byte(b), &ev) == nil && ev.Data.CandidateSnapshotDigest == candidate {
				ev.Authorization = h.auths[i]
				found = ev
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no webhook event for candidate %s (received %d)", candidate, len(h.all()))
	}
	return found
}
