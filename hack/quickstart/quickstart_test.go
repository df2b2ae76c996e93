package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// draftProfile is what `mcpctl profile init` prints for the sample tools.
func draftProfile(t *testing.T) []byte {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(sampleTools), &raw); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "weather"}, raw)
	if err != nil {
		t.Fatal(err)
	}
	y, err := ocipack.EncodeProfile(ocipack.Draft(s), ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// TestApplyReview: the reviewer's decisions make a profile that validates, with every effect set
// from the decisions and the forecast operation found.
func TestApplyReview(t *testing.T) {
	r, err := applyReview(draftProfile(t), reviewDecisions)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ocipack.DecodeProfile(r.yaml)
	if err != nil {
		t.Fatal(err)
	}
	if err := ocipack.Validate(doc); err != nil {
		t.Fatalf("reviewed profile does not validate: %v", err)
	}
	if len(r.ops) != 3 {
		t.Fatalf("ops = %v, want 3", r.ops)
	}
	for _, op := range r.ops {
		if op.effect != reviewDecisions[op.remote] {
			t.Errorf("%s (%s): effect %q, want %q", op.ref, op.remote, op.effect, reviewDecisions[op.remote])
		}
	}
	if r.opByTool["get_forecast"] == "" {
		t.Fatalf("no operation for get_forecast: %v", r.opByTool)
	}
}

// TestApplyReviewRefusesUnreviewed is the must-fail twin: a tool without a decision leaves the
// draft's "unreviewed" effect, and the review fails naming it before anything is pushed.
func TestApplyReviewRefusesUnreviewed(t *testing.T) {
	partial := map[string]string{"get_forecast": "read", "list_alerts": "read"}
	_, err := applyReview(draftProfile(t), partial)
	if !errors.Is(err, errUnreviewed) || !errors.Is(err, ocipack.ErrUnreviewedEffect) || refusal.Name(err) != ocipack.RefusalUnreviewed {
		t.Fatalf("err = %v, want errUnreviewed with refusal %s", err, ocipack.RefusalUnreviewed)
	}
	_, err = applyReview(draftProfile(t), map[string]string{"get_forecast": "read", "list_alerts": "read", "subscribe": "maybe"})
	if refusal.Name(err) != ocipack.RefusalInvalidEffect {
		t.Fatalf("err = %v, want refusal %s for an effect outside read, write, destructive", err, ocipack.RefusalInvalidEffect)
	}
}

// strictDecode decodes one YAML document into out as the apiserver does with --validate=strict:
// field names match exactly (case-sensitive), unknown and duplicate fields are errors.
func strictDecode(t *testing.T, doc string, out any) error {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return err
	}
	strict, err := k8sjson.UnmarshalStrict(js, out, k8sjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// TestManifests: every object the quickstart applies decodes strictly into its API type (no
// misspelt or unknown field), with the values the story relies on.
func TestManifests(t *testing.T) {
	const packRef = "127.0.0.1:5000/demo/weather@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	docs := strings.Split(demoManifest(packRef, "127.0.0.1:8931", []string{"get-forecast", "list-alerts", "subscribe"}), "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("demo manifest has %d documents, want 4", len(docs))
	}
	var profile apiv1.McpServiceProfile
	if err := strictDecode(t, docs[0], &profile); err != nil {
		t.Fatalf("profile: %v", err)
	}
	if profile.Spec.Source.OCI == nil || profile.Spec.Source.OCI.Ref != packRef || profile.Namespace != namespace {
		t.Fatalf("profile = %+v", profile)
	}
	var dep apiv1.ServiceDeployment
	if err := strictDecode(t, docs[3], &dep); err != nil {
		t.Fatalf("deployment: %v", err)
	}
	if len(dep.Spec.Operations) != 3 || dep.Spec.Operations[2].OperationRef != "subscribe" ||
		dep.Spec.Operations[0].GrantRefs[0] != "agents-invoke-weather" || dep.Spec.MCPConnection.URL != "http://127.0.0.1:8931/mcp" {
		t.Fatalf("deployment = %+v", dep.Spec)
	}
	var tp apiv1.McpTrustPolicy
	if err := strictDecode(t, trustPolicyManifest([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")), &tp); err != nil {
		t.Fatalf("trust policy: %v", err)
	}
	if len(tp.Spec.Signers) != 1 || tp.Spec.Signers[0].PublicKeyPEM != "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n" {
		t.Fatalf("trust policy signers = %+v", tp.Spec.Signers)
	}
	var tagged apiv1.McpServiceProfile
	if err := strictDecode(t, taggedProfileManifest("127.0.0.1:5000"), &tagged); err != nil {
		t.Fatalf("tagged profile: %v", err)
	}
	if ref := tagged.Spec.Source.OCI.Ref; !strings.HasSuffix(ref, ":latest") || strings.Contains(ref, "@sha256:") {
		t.Fatalf("tagged profile ref = %q, want a tag and no digest", ref)
	}
	// The twin: the strict decode this test relies on does refuse a misspelt field.
	if err := strictDecode(t, strings.Replace(docs[3], "providerID:", "providerId:", 1), &dep); err == nil {
		t.Fatal("a misspelt field decoded without error")
	}
}

func TestExitStatus(t *testing.T) {
	failed := errors.New("step failed")
	cases := []struct {
		name       string
		err, cause error
		want       int
	}{
		{"success", nil, nil, exitOK},
		{"a step failed", failed, nil, exitFailed},
		{"Ctrl-C", context.Canceled, signalError{os.Interrupt}, exitInterrupt},
		{"SIGTERM", context.Canceled, signalError{syscall.SIGTERM}, exitTerminate},
		{"Ctrl-C while QUICKSTART_KEEP waits", signalError{os.Interrupt}, signalError{os.Interrupt}, exitInterrupt},
	}
	for _, tc := range cases {
		if got := exitStatus(tc.err, tc.cause); got != tc.want {
			t.Errorf("%s: exitStatus = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestWaitFor runs real child processes: the wait returns the first match of what the process
// printed, and fails (naming the process) when it exits without printing it.
func TestWaitFor(t *testing.T) {
	q := &quickstart{stdout: &strings.Builder{}, stderr: &strings.Builder{}, work: t.TempDir(), root: t.TempDir()}
	defer func() {
		for _, p := range q.procs {
			p.stop()
		}
	}()
	p, err := q.start("server.log", "sh", "-c", "echo 'listening on 127.0.0.1:8931'; echo 'serving on port 4242' >&2; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.waitFor(context.Background(), p, regexp.MustCompile(`serving on port [0-9]+`))
	if err != nil || got != "serving on port 4242" {
		t.Fatalf("waitFor = %q, %v", got, err)
	}
	if log, err := os.ReadFile(filepath.Join(q.work, "server.log")); err != nil || !strings.Contains(string(log), "listening on 127.0.0.1:8931") {
		t.Fatalf("log file = %q, %v; want the process output", log, err)
	}
	p.stop()
	select {
	case <-p.done:
	default:
		t.Fatal("stop returned before the process exited")
	}

	quiet, err := q.start("quiet.log", "sh", "-c", "echo 'something else'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.waitFor(context.Background(), quiet, regexp.MustCompile(`serving on port [0-9]+`)); err == nil || !strings.Contains(err.Error(), "sh exited") {
		t.Fatalf("waitFor on a process that exits without the line: err = %v, want it to name the exit", err)
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\n", 2); got != "b\nc\n" {
		t.Errorf("lastLines = %q", got)
	}
	if got := lastLines("a\nb", 5); got != "a\nb\n" {
		t.Errorf("lastLines = %q", got)
	}
	if got := lastLines("", 5); got != "" {
		t.Errorf("lastLines of nothing = %q", got)
	}
}
