//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// leaseDuration is the chart's manager lease duration (controller-runtime's default).
const leaseDuration = 15 * time.Second

// leaderTakeover: the Pod holding the manager's Lease is deleted at once (grace 0), and at the same
// moment the team changes its ServiceDeployment (echo no longer exposed). The other replica takes
// the Lease and reconciles the change within the lease duration plus one pass.
func (e *env) leaderTakeover(t *testing.T) {
	ctx := t.Context()
	holder := e.leaseHolder(t)
	pod, _, _ := strings.Cut(holder, "_")
	if err := e.cs.CoreV1().Pods(namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.must(t, e.kubectl, "-n", callerNS, "patch", "sdep", "weather", "--type=json",
		"-p", `[{"op":"test","path":"/spec/operations/1/operationRef","value":"`+e.act.ops["echo"]+`"},{"op":"replace","path":"/spec/operations/1/expose","value":false}]`)
	// With the holder gone without releasing, the other replica acquires the Lease after at most
	// the lease duration plus a retry period.
	deadline := start.Add(2 * time.Minute)
	for {
		if h := e.leaseHolder(t); h != "" && !strings.HasPrefix(h, pod+"_") {
			t.Logf("lease taken over by %s %.1fs after %s was killed", h, time.Since(start).Seconds(), pod)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other replica took the Lease within 2 minutes of killing %s", pod)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One pass: pull (the verified-pack store), verify, freeze through egress, compare, bind.
	const onePass = 30 * time.Second
	for {
		sd, err := e.deployment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sd.Status.ObservedGeneration == sd.Generation && ready(sd) {
			took := time.Since(start)
			t.Logf("the change made during the leader loss reconciled %.1fs after the kill", took.Seconds())
			if took > leaseDuration+onePass {
				t.Errorf("the change took %s to reconcile, want within the lease duration (%s) plus one pass (%s)", took, leaseDuration, onePass)
			}
			return
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the change made during the leader loss is not reconciled after 3 minutes (generation %d, observed %d)",
				sd.Generation, sd.Status.ObservedGeneration)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deployment reads the team's ServiceDeployment.
func (e *env) deployment(ctx context.Context) (*apiv1.ServiceDeployment, error) {
	out, err := e.cmd(ctx, e.kubectl, "-n", callerNS, "get", "sdep", "weather", "-o", "json")
	if err != nil {
		return nil, err
	}
	sd := &apiv1.ServiceDeployment{}
	return sd, json.Unmarshal([]byte(out), sd)
}

// ready: the deployment's Ready condition is True for its current generation.
func ready(sd *apiv1.ServiceDeployment) bool {
	for _, c := range sd.Status.Conditions {
		if c.Type == apiv1.ConditionReady {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == sd.Generation
		}
	}
	return false
}

func (e *env) leaseHolder(t *testing.T) string {
	l, err := e.cs.CoordinationV1().Leases(namespace).Get(t.Context(), "connector-mcp.connectors.b10x.io", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// upgrade: `helm upgrade` to a second image digest (another source date, so another build) rolls
// both Deployments while an agent keeps calling through the gateway, retrying as docs/gateway.md
// tells callers: no call fails, and every Pod then runs the new digest and is Ready.
func (e *env) upgrade(t *testing.T) {
	ctx := t.Context()
	out := e.must(t, "env", "SOURCE_DATE_EPOCH=1700000000", "make", "-s", "image", "IMAGE_REPO="+e.imageRepo, "IMAGE_PLATFORMS=linux/amd64")
	next := digestIn(out)
	if next == "" || next == e.digest {
		t.Fatalf("the second build gave no new digest: %q", out)
	}
	const calling = 100 * time.Second
	e.startAgent(t, "agent-retrying", "connector-mcp", "--call", e.act.ops["get_forecast"], "--args", `{"city":"Oslo"}`, "--repeat-for", calling.String())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		logs, _ := e.cmd(ctx, e.kubectl, "logs", "-n", callerNS, "agent-retrying")
		if strings.Contains(logs, `"started"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retrying agent did not start calling: %q", logs)
		}
		time.Sleep(time.Second)
	}
	start := time.Now()
	e.must(t, e.helm, "upgrade", release, "charts/connector-mcp", "--namespace", namespace, "--reuse-values",
		"--set", "image.digest="+next, "--wait", "--timeout", "5m")
	e.waitRollout(t, next)
	e.digest = next
	t.Logf("rolled to %s in %.1fs", next, time.Since(start).Seconds())
	if time.Since(start) > calling {
		t.Errorf("the rollout outlasted the calling agent (%s): the check covers only part of it", calling)
	}
	got := e.agentResult(t, "agent-retrying", calling+2*time.Minute)
	if got.Calls == 0 || got.Failed != 0 {
		t.Errorf("during the upgrade: %d calls, %d failed after retries (%d retries), want none failed", got.Calls, got.Failed, got.Retried)
	}
	t.Logf("during the upgrade: %d calls, %d retried, none failed", got.Calls, got.Retried)
}
