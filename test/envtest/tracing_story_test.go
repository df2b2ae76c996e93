package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/tracing"
	"github.com/b10x/connector-mcp/internal/tracing/otlptest"
)

// startTracing points the process's tracing at a real OTLP receiver for the test (the standard
// OTEL_* variables, as the chart sets them) and returns it; the test's cleanup flushes and puts
// the no-op provider back.
func startTracing(t *testing.T, rcv *otlptest.Receiver) {
	t.Helper()
	for k, v := range rcv.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	c, shutdown, err := tracing.Setup(context.Background(), "connector-mcp-manager", "")
	if err != nil || !c.Enabled {
		t.Fatalf("tracing setup: %+v %v", c, err)
	}
	t.Cleanup(func() {
		_ = shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
	})
}

// spansOf waits until the receiver holds spans of ns matching want, and returns all of ns's.
func spansOf(t *testing.T, rcv *otlptest.Receiver, ns string, want func([]otlptest.Span) bool) []otlptest.Span {
	t.Helper()
	deadline := time.Now().Add(storyTimeout)
	for {
		byID := map[string]otlptest.Span{}
		var inNS []otlptest.Span
		all := rcv.Spans()
		for _, s := range all {
			byID[s.SpanID] = s
		}
		for _, s := range all {
			for r := s; ; {
				if r.Attributes["connector_mcp.namespace"] == ns {
					inNS = append(inNS, s)
					break
				}
				p, ok := byID[r.ParentSpanID]
				if !ok {
					break
				}
				r = p
			}
		}
		if want(inNS) {
			return inNS
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver has no such spans of %s after %s; it has %d (%d of the namespace): %s", ns, storyTimeout, len(all), len(inNS), spanNames(inNS))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func spanNames(spans []otlptest.Span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(s.Name + "[" + s.StatusCode + " " + s.StatusMessage + "] ")
	}
	return b.String()
}

// readyPass finds the deployment pass span that ended Ok and its stage children, in order.
func readyPass(spans []otlptest.Span) (otlptest.Span, []otlptest.Span, bool) {
	for _, p := range spans {
		if p.Name != "reconcile ServiceDeployment" || p.StatusCode != "Ok" {
			continue
		}
		var stages []otlptest.Span
		for _, s := range spans {
			if s.ParentSpanID == p.SpanID && strings.HasPrefix(s.Name, "stage ") {
				stages = append(stages, s)
			}
		}
		if len(stages) == 4 {
			return p, stages, true
		}
	}
	return otlptest.Span{}, nil, false
}

// TestStoryActivationTrace: one activation (its audit records too), exported over OTLP/HTTP to a real receiver, is a span
// tree: the profile's pass with its SourceVerified stage (the pack's signature and provenance
// check and its pull under it); the deployment's pass with its four stages in the table's order,
// all Ok, the pass carrying the snapshot digest. The must-fail half: a deployment whose endpoint
// the egress policy refuses ends its pass and its Bound stage in Error with the reason and the
// refusal name, and no span carries the endpoint's URL, a token or the tools' prose.
func TestStoryActivationTrace(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	startTracing(t, rcv)
	ns := newNamespace(t, "story-trace")
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	var auditBuf syncBuffer
	o.AuditLogger = audit.New(&auditBuf)
	startOperator(t, ns, o)
	ref := w.push(t, "team/traced")
	w.sign(t, ref, packRef)
	mustCreate(t, packProfile(ns, "demo", ref, mainPolicy()))
	makeGrant(t, ns, "all")
	sd := newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])

	spans := spansOf(t, rcv, ns, func(s []otlptest.Span) bool { _, _, ok := readyPass(s); return ok })
	pass, stages, _ := readyPass(spans)
	want := []string{"stage " + apiv1.ConditionProfileVerified, "stage " + apiv1.ConditionBound, "stage " + apiv1.ConditionSnapshotFrozen, "stage " + apiv1.ConditionSnapshotMatched}
	for i, s := range stages {
		if s.Name != want[i] && !containsName(stages, want[i]) {
			t.Errorf("stage spans %s, want %v", spanNames(stages), want)
			break
		}
		if s.StatusCode != "Ok" || s.TraceID != pass.TraceID {
			t.Errorf("stage %s: %s in trace %s (pass %s)", s.Name, s.StatusCode, s.TraceID, pass.TraceID)
		}
	}
	if pass.Attributes["connector_mcp.snapshot_digest"] != w.doc.Snapshot.Digest || pass.Attributes["connector_mcp.name"] != "demo" {
		t.Errorf("pass attributes %v", pass.Attributes)
	}
	var prof, verified, verify, pull otlptest.Span
	for _, s := range spans {
		switch {
		case s.Name == "reconcile McpServiceProfile" && s.StatusCode == "Ok":
			prof = s
		}
	}
	for _, s := range spans {
		if s.Name == "stage "+apiv1.ConditionSourceVerified && s.ParentSpanID == prof.SpanID && prof.SpanID != "" {
			verified = s
		}
	}
	for _, s := range rcv.Spans() {
		switch {
		case s.Name == "verify pack signature and provenance" && s.ParentSpanID == verified.SpanID && verified.SpanID != "":
			verify = s
		case s.Name == "pull pack" && s.ParentSpanID == verified.SpanID && verified.SpanID != "":
			pull = s
		}
	}
	if prof.SpanID == "" || verified.SpanID == "" || verify.SpanID == "" || pull.SpanID == "" {
		t.Errorf("profile pass tree incomplete: pass %q, SourceVerified %q, verify %q, pull %q (spans %s)", prof.SpanID, verified.SpanID, verify.SpanID, pull.SpanID, spanNames(spans))
	}

	// Must-fail: an endpoint egress refuses at binding, before anything is dialed (a private
	// address no range allows).
	refused := newDeployment(ns, "refused", "demo", "refused", "https://10.0.0.1/mcp", w.doc, nil, "all")
	mustCreate(t, refused)
	spans = spansOf(t, rcv, ns, func(s []otlptest.Span) bool {
		for _, x := range s {
			if x.Name == "stage "+apiv1.ConditionBound && x.StatusCode == "Error" {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.Name == "stage "+apiv1.ConditionBound && s.StatusCode == "Error" {
			if !strings.HasPrefix(s.StatusMessage, apiv1.ReasonEndpointRefused) || s.Attributes["connector_mcp.reason"] != apiv1.ReasonEndpointRefused {
				t.Errorf("refused Bound stage: %q %v", s.StatusMessage, s.Attributes)
			}
		}
	}
	// The audit trail: the deployment's activation and its refused twin, each one record, in the
	// trace of its pass, with names, digests and refusal names only.
	records := auditRecords(t, &auditBuf, ns)
	for deadline := time.Now().Add(storyTimeout); records["ServiceDeployment/refused"].Outcome == "" && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // the record follows the status write, after the span
		records = auditRecords(t, &auditBuf, ns)
	}
	act, ok := records["ServiceDeployment/demo"]
	if !ok || act.Outcome != apiv1.ReasonActivated || act.SnapshotDigest != w.doc.Snapshot.Digest || act.TraceID != pass.TraceID ||
		act.Generation != 1 || act.DurationSeconds == nil || act.V != audit.Version {
		t.Errorf("activation record %+v (pass trace %s)", act, pass.TraceID)
	}
	ref2, ok := records["ServiceDeployment/refused"]
	if !ok || ref2.Outcome != apiv1.ReasonEndpointRefused || ref2.Refusal != "destination_refused" || ref2.SnapshotDigest != "" {
		t.Errorf("refusal record %+v", ref2)
	}
	if prof, ok := records["McpServiceProfile/demo"]; !ok || prof.Outcome != apiv1.ReasonVerified || prof.ProfileDigest == "" {
		t.Errorf("profile record %+v", prof)
	}
	for _, secret := range []string{"/mcp", "10.0.0.1", "127.0.0.1", "Bearer", "Echo the arguments"} {
		if strings.Contains(auditBuf.String(), secret) {
			t.Errorf("the audit trail carries %q:\n%s", secret, auditBuf.String())
		}
	}
	for _, s := range rcv.Spans() {
		for k, v := range s.Attributes {
			for _, secret := range []string{"/mcp", "10.0.0.1", "Bearer", "Echo the arguments", w.url} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s=%q carries %q", s.Name, k, v, secret)
				}
			}
		}
		if strings.Contains(s.StatusMessage, "/mcp") || strings.Contains(s.StatusMessage, "127.0.0.1") || strings.Contains(s.StatusMessage, "10.0.0.1") {
			t.Errorf("span %s status carries an address: %q", s.Name, s.StatusMessage)
		}
	}
}

func containsName(spans []otlptest.Span, name string) bool {
	for _, s := range spans {
		if s.Name == name {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for the reconcilers' concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// auditRecords decodes the trail (every line must be a record) and returns the last record of
// each object of ns, by "Kind/name".
func auditRecords(t *testing.T, buf *syncBuffer, ns string) map[string]audit.Record {
	t.Helper()
	out := map[string]audit.Record{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r audit.Record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if r.Namespace == ns {
			out[r.Object+"/"+r.Name] = r
		}
	}
	return out
}
