package envtest

// The drift review loop, end to end with the real commands: for each kind of upstream change the
// operator records the candidate; the reviewer runs the mcpctl binary (review show, review repin,
// profile check, pack push, pack sign) against this apiserver and the in-process OCI registry;
// the platform applies the new pack digest; the deployment is Ready again on the new snapshot,
// the review is gone and leases issued before the re-review are stale.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/ocipack"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/review-loop/*.golden from the current output")

var (
	mcpctlOnce sync.Once
	mcpctlBin  string
	mcpctlErr  error
)

// mcpctlBinary builds cmd/mcpctl once per test process.
func mcpctlBinary(t *testing.T) string {
	t.Helper()
	mcpctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpctl-envtest-")
		if err != nil {
			mcpctlErr = err
			return
		}
		mcpctlBin = filepath.Join(dir, "mcpctl")
		cmd := exec.CommandContext(context.Background(), "go", "build", "-o", mcpctlBin, "./cmd/mcpctl")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpctlErr = errors.New("go build ./cmd/mcpctl: " + err.Error() + "\n" + string(out))
		}
	})
	if mcpctlErr != nil {
		t.Fatal(mcpctlErr)
	}
	return mcpctlBin
}

// cli runs the mcpctl binary as a reviewer would: with a kubeconfig for this apiserver and its
// own empty home.
type cli struct {
	bin, kubeconfig, home string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	if err := cluster.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	return &cli{bin: mcpctlBinary(t), kubeconfig: kc, home: home}
}

func (c *cli) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), c.bin, args...)
	cmd.Env = []string{"KUBECONFIG=" + c.kubeconfig, "HOME=" + c.home, "XDG_STATE_HOME=" + c.home, "XDG_CONFIG_HOME=" + c.home, "PATH=" + os.Getenv("PATH")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("mcpctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// must runs the command and fails the test unless it exits 0.
func (c *cli) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := c.run(t, args...)
	if code != 0 {
		t.Fatalf("mcpctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// loopWorld is a registry, a platform signing key (private half in a PEM file for "mcpctl pack
// sign", public half in the manager's flags and in a Secret) and a live server.
type loopWorld struct {
	reg              *ocitest.Registry
	keyPath, pubPath string
	srv              *mcp.Server
	live             *switchable
	dir              string
}

func newLoopWorld(t *testing.T, ns string) *loopWorld {
	t.Helper()
	w := &loopWorld{reg: ocitest.New(ocitest.Options{Referrers: true}), dir: t.TempDir()}
	t.Cleanup(w.reg.Close)
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	w.keyPath, w.pubPath = filepath.Join(w.dir, "signing.key"), filepath.Join(w.dir, "signing.pub")
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	writeFile(t, w.keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	writeFile(t, w.pubPath, pubPEM)
	mustCreate(t, newSecret(ns, "signing-key", "cosign.pub", string(pubPEM)))
	srv, h := modernServer(mcptest.DefaultTools())
	w.srv, w.live = srv, startSwitchable(t, h)
	return w
}

// pushAndSign packs the profile file with "mcpctl pack push", signs it with "mcpctl pack sign"
// (provenance from the protected branch) and returns the digest reference it printed.
func (w *loopWorld) pushAndSign(t *testing.T, c *cli, file string) ociregistry.Reference {
	t.Helper()
	out := strings.TrimSpace(c.must(t, "pack", "push", file, "--to", w.reg.Host+"/team/svc", "--plain-http"))
	ref, err := ociregistry.ParseDigestReference(out)
	if err != nil {
		t.Fatalf("pack push printed %q: %v", out, err)
	}
	c.must(t, "pack", "sign", ref.String(), "--key", w.keyPath, "--plain-http",
		"--provenance-source-repo", packRepo, "--provenance-ref", packRef, "--provenance-revision", packRevision,
		"--provenance-builder-id", "https://ci.example/builder")
	return ref
}

// loopCase is one kind of upstream change.
type loopCase struct {
	name string
	// change makes the live server drift.
	change func(w *loopWorld)
	// classes is the recorded candidate's class count.
	classes map[string]int32
	// marked is the number of operations repin marks for re-review ("unreviewed").
	marked int
	// ops is the number of operations of the repinned profile.
	ops int
}

func loopCases() []loopCase {
	return []loopCase{
		{name: "text-only", change: func(w *loopWorld) {
			echo := mcptest.DefaultTools()[0]
			echo.Description = "Echo the arguments back as text, politely."
			mcptest.SetTool(w.srv, echo)
		}, classes: map[string]int32{review.ClassTextOnly: 1}, marked: 1, ops: 4},
		{name: "widened-schema", change: func(w *loopWorld) {
			add := mcptest.DefaultTools()[1]
			add.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"c":{"type":"number"}}}`)
			mcptest.SetTool(w.srv, add)
		}, classes: map[string]int32{review.ClassSchemaWidened: 1}, marked: 1, ops: 4},
		{name: "new-tool", change: func(w *loopWorld) {
			mcptest.SetTool(w.srv, &mcp.Tool{Name: "export", InputSchema: json.RawMessage(`{"type":"object"}`)})
		}, classes: map[string]int32{review.ClassNewTool: 1}, marked: 1, ops: 5},
		{name: "removed-tool", change: func(w *loopWorld) {
			w.srv.RemoveTools("fail")
		}, classes: map[string]int32{review.ClassRemovedTool: 1}, marked: 0, ops: 3},
		{name: "protocol-change", change: func(w *loopWorld) {
			w.live.set(mcptest.HTTPHandler(w.srv, mcptest.Legacy)) // the upstream switches to the 2025-11-25 era
		}, classes: map[string]int32{review.ClassProtocolChange: 1}, marked: 0, ops: 4},
	}
}

// waitRefusedSeries waits until refusedSeries(ns) equals want. The gauge is derived from the
// manager's informer cache at each scrape, which may trail a status the story has just read from
// the apiserver; it fails with the last series seen.
func waitRefusedSeries(t *testing.T, c prometheus.Collector, ns string, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	if !pollUntil(pollInterval, storyTimeout, func() bool { got = refusedSeries(t, c, ns); return maps.Equal(got, want) }) {
		t.Fatalf("refused gauge = %v, want %v", got, want)
	}
}

// refusedSeries returns connector_mcp_refused_deployments{deployment_namespace=ns} by reason.
func refusedSeries(t *testing.T, c prometheus.Collector, ns string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	c.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["deployment_namespace"] == ns {
			out[labels["reason"]] = d.GetGauge().GetValue()
		}
	}
	return out
}

var (
	frozenAtRe = regexp.MustCompile(`(?m)^frozen at:  .*$`)
)

// normalizeShow replaces what differs between runs (the namespace, the freeze time).
func normalizeShow(out, ns string) string {
	out = strings.ReplaceAll(out, ns+"/", "NAMESPACE/")
	return frozenAtRe.ReplaceAllString(out, "frozen at:  TIME")
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(repoRoot, "test", "envtest", "testdata", "review-loop", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, []byte(got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with -update to create it)", path, err)
	}
	if string(want) != got {
		t.Fatalf("review show differs from %s (run with -update after checking):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func TestStoryReviewLoopWithRealCommands(t *testing.T) {
	for i, tc := range loopCases() {
		t.Run(tc.name, func(t *testing.T) { reviewLoop(t, tc, i == 0) })
	}
}

func reviewLoop(t *testing.T, tc loopCase, restart bool) {
	ctx := context.Background()
	ns := newNamespace(t, "story-loop")
	w := newLoopWorld(t, ns)
	c := newCLI(t)
	o := devOptions()
	o.ReverifyInterval, o.ReverifyJitter = time.Second, 0
	o.SkipProvenanceUnsafe = false
	o.DefaultPublicKeyPath = w.pubPath
	o.DefaultSourceRepository, o.DefaultSourceRef = packRepo, packRef
	op := startOperator(t, ns, o)

	// The reviewed profile in the reviewer's Git checkout, packed and signed with the CLI.
	doc := reviewedProfile(t, w.live.URL)
	reviewedPath := filepath.Join(w.dir, "svc.yaml")
	enc, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, reviewedPath, enc)
	ref1 := w.pushAndSign(t, c, reviewedPath)
	prof := packProfile(ns, "svc", ref1, mainPolicy())
	mustCreate(t, prof)
	makeGrant(t, ns, "invoke", "svc")
	sd := newDeployment(ns, "svc", "svc", "svc", w.live.URL, doc, nil, "invoke")
	mustCreate(t, sd)
	sd = waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])
	if len(refusedSeries(t, op.wired.Refused, ns)) != 0 {
		t.Fatalf("refused gauge of a Ready namespace = %v, want no series", refusedSeries(t, op.wired.Refused, ns))
	}

	// A lease issued on the reviewed surface works.
	agent := invocation.Caller{User: "system:serviceaccount:" + ns + ":agent", Seed: "serviceaccount:" + ns + "/agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	iopts := invocation.Options{
		Connector:  &invocation.EgressConnector{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}},
		Authorizer: &invocation.SubjectAccessReviewer{Client: k8sClient}, MaxSessionAge: -1,
	}
	echo := func(s *invocation.Surface, lease string) error {
		_, err := s.Invoke(ctx, invocation.Request{Caller: agent, Lease: lease, Operation: "echo", Connection: "demo", Arguments: json.RawMessage(`{"text":"hi"}`)})
		return err
	}
	s1, err := invocation.NewSurface(doc, sd, iopts)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := s1.Describe(ctx, agent, "echo", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(s1, d1.Lease); err != nil {
		t.Fatalf("invoke on the reviewed surface: %v", err)
	}

	// The upstream changes: refused, recorded, classified.
	tc.change(w)
	sd = waitObj(t, sd, storyTimeout, "drift refusal", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDrift)
	})
	rv := waitObj(t, &apiv1.McpSnapshotReview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, storyTimeout, "review recorded",
		func(rv *apiv1.McpSnapshotReview) bool {
			return rv.Spec.CandidateSnapshotDigest == sd.Status.CandidateSnapshotDigest
		})
	if !equalCounts(rv.Spec.Classes, tc.classes) || !equalCounts(sd.Status.Drift.Classes, tc.classes) {
		t.Fatalf("classes: review %v, deployment %v, want %v", rv.Spec.Classes, sd.Status.Drift.Classes, tc.classes)
	}
	waitRefusedSeries(t, op.wired.Refused, ns, map[string]float64{apiv1.ReasonSnapshotDrift: 1})
	if restart {
		// A restarted manager derives the same gauge from its fresh informer.
		op.stop()
		op = startOperator(t, ns, o)
		var got map[string]float64
		if !pollUntil(pollInterval, storyTimeout, func() bool {
			got = refusedSeries(t, op.wired.Refused, ns)
			return len(got) == 1 && got[apiv1.ReasonSnapshotDrift] == 1
		}) {
			t.Fatalf("refused gauge after restart = %v, want SnapshotDrift 1", got)
		}
	}

	// The reviewer: review show (golden), review repin, profile check, pack push, pack sign.
	show := c.must(t, "review", "show", ns+"/svc")
	checkGolden(t, tc.name, normalizeShow(show, ns))
	newPath := filepath.Join(w.dir, "svc-new.yaml")
	_, repinErr, code := c.run(t, "review", "repin", ns+"/svc", "--profile", reviewedPath, "--out-file", newPath)
	if code != 0 {
		t.Fatalf("review repin: exit %d: %s", code, repinErr)
	}
	b, err := os.ReadFile(newPath)
	if err != nil {
		t.Fatal(err)
	}
	newDoc, err := ocipack.DecodeProfile(b)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, m := range newDoc.Operations {
		if m.Effect == apiv1.EffectUnreviewed {
			marked++
		}
	}
	if marked != tc.marked || len(newDoc.Operations) != tc.ops {
		t.Fatalf("repinned profile: %d unreviewed of %d operations, want %d of %d\n%s", marked, len(newDoc.Operations), tc.marked, tc.ops, repinErr)
	}
	if marked > 0 {
		// Must-fail twin: the file is not ready to pack while an effect is unreviewed.
		_, errOut, code := c.run(t, "profile", "check", "--profile", newPath, "--url", w.live.URL)
		if code != 3 || !strings.Contains(errOut, "refused: "+ocipack.RefusalUnreviewed+"\n") {
			t.Fatalf("profile check of the repinned file: exit %d, stderr %s; want 3 and refused: unreviewed", code, errOut)
		}
		if _, errOut, code := c.run(t, "pack", "push", newPath, "--to", w.reg.Host+"/team/svc", "--plain-http"); code != 3 || !strings.Contains(errOut, "refused: unreviewed") {
			t.Fatalf("pack push of the repinned file: exit %d, stderr %s; want 3 and refused: unreviewed", code, errOut)
		}
		// The human review: set the effects after reading the diff.
		for i := range newDoc.Operations {
			if newDoc.Operations[i].Effect == apiv1.EffectUnreviewed {
				newDoc.Operations[i].Effect = apiv1.EffectRead
			}
		}
		enc, err := ocipack.EncodeProfile(newDoc, ocipack.FormatYAML)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, newPath, enc)
	}
	c.must(t, "profile", "check", "--profile", newPath, "--url", w.live.URL)
	ref2 := w.pushAndSign(t, c, newPath)
	if ref2.Digest == ref1.Digest {
		t.Fatal("the re-reviewed pack has the old digest")
	}

	// The platform applies the new digest (the Git bump) and binds the new operation set.
	mutate(t, prof, func(p *apiv1.McpServiceProfile) { p.Spec.Source.OCI.Ref = ref2.String() })
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) {
		sd.Spec.Operations = newDeployment(ns, sd.Name, "svc", "svc", w.live.URL, newDoc, nil, "invoke").Spec.Operations
	})
	newProfileDigest, err := ocipack.ProfileDigest(newDoc)
	if err != nil {
		t.Fatal(err)
	}
	sd = waitObj(t, sd, storyTimeout, "Ready on the new snapshot", func(sd *apiv1.ServiceDeployment) bool {
		return isReady(sd) && sd.Status.ActiveSnapshotDigest == newDoc.Snapshot.Digest && sd.Status.ProfileDigest == newProfileDigest &&
			sd.Status.ObservedGeneration == sd.Generation
	})
	if sd.Status.ActiveSnapshotDigest != rv.Spec.CandidateSnapshotDigest {
		t.Fatalf("active snapshot %s, want the recorded candidate %s", sd.Status.ActiveSnapshotDigest, rv.Spec.CandidateSnapshotDigest)
	}
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		err = k8sClient.Get(ctx, objKey(rv), &apiv1.McpSnapshotReview{})
		return apierrors.IsNotFound(err)
	}) {
		t.Fatalf("review still present after re-activation: %v", err)
	}
	waitRefusedSeries(t, op.wired.Refused, ns, map[string]float64{}) // no series after re-activation

	// Leases issued before the re-review are stale; new ones work.
	s2, err := invocation.NewSurface(newDoc, sd, iopts)
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(s2, d1.Lease); !errors.Is(err, invocation.ErrStaleLease) {
		t.Fatalf("old lease on the re-reviewed surface: %v, want stale_lease", err)
	}
	d2, err := s2.Describe(ctx, agent, "echo", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if d2.Lease == d1.Lease {
		t.Fatal("the re-reviewed surface issues the old lease")
	}
	if err := echo(s2, d2.Lease); err != nil {
		t.Fatalf("invoke with the new lease: %v", err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil { //nolint:gosec // G703: a test temp or testdata path
		t.Fatal(err)
	}
}
