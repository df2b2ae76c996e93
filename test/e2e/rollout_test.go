//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// leaseDuration is the chart's manager lease duration (controller-runtime's default).
const leaseDuration = 15 * time.Second

// leaderTakeover: the process of the manager holding the Lease is killed with SIGKILL (as the
// OOM killer or a lost node would: it cannot release the Lease), and at the same moment the team
// changes its ServiceDeployment (echo no longer exposed). Another manager takes the Lease once it
// expires and reconciles the change within the lease duration plus one pass.
func (e *env) leaderTakeover(t *testing.T) {
	ctx := t.Context()
	holder := e.leaseHolder(t)
	pod, _, _ := strings.Cut(holder, "_")
	p, err := e.cs.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	pids := containerPIDs(t, id)
	if len(pids) == 0 {
		t.Fatalf("no process of container %s (leader %s) found", id, pod)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	e.must(t, e.kubectl, "-n", callerNS, "patch", "sdep", "weather", "--type=json",
		"-p", `[{"op":"test","path":"/spec/operations/1/operationRef","value":"`+e.act.ops["echo"]+`"},{"op":"replace","path":"/spec/operations/1/expose","value":false}]`)
	// The killed holder did not release the Lease: another manager (the other replica, or the
	// killed one's restarted container) acquires it after the lease duration plus a retry period.
	deadline := start.Add(2 * time.Minute)
	for {
		if h := e.leaseHolder(t); h != "" && h != holder {
			t.Logf("lease taken over by %s %.1fs after the leader %s was killed", h, time.Since(start).Seconds(), holder)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no manager took the Lease within 2 minutes of killing %s", holder)
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

// containerPIDs lists the processes of the container id: those whose cgroup path names it (the
// kubelet's cgroupfs layout ends each container's cgroup in its ID).
func containerPIDs(t *testing.T, id string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cgroup"))
		if err == nil && strings.Contains(string(b), id) {
			pids = append(pids, pid)
		}
	}
	return pids
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
