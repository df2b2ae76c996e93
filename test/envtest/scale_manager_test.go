package envtest

// The scale story's manager runs as its own process: cmd/manager, built once per test process,
// started against this control plane's kubeconfig with the flags the chart passes (its default
// values), so its memory and CPU are measured apart from the test's creators, watches and MCP
// server. Its figures come from /proc/PID (VmRSS, VmHWM, utime+stime) and its own metrics
// endpoint (reconciles, API requests).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binariesMu sync.Mutex
	binaries   = map[string]string{}
)

// builtBinary builds the command at pkg (e.g. "./cmd/manager") once per test process and returns
// its path.
func builtBinary(t testing.TB, pkg string) string {
	t.Helper()
	binariesMu.Lock()
	defer binariesMu.Unlock()
	if bin, ok := binaries[pkg]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "envtest-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", bin, pkg)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	binaries[pkg] = bin
	return bin
}

// managerBinary builds cmd/manager once per test process.
func managerBinary(t testing.TB) string { return builtBinary(t, "./cmd/manager") }

// managerProcess is a running cmd/manager (or, started by startProcess, cmd/gateway).
type managerProcess struct {
	cmd        *exec.Cmd
	metricsURL string
	pprofURL   string
	logPath    string
	exited     chan struct{}
}

// chartManagerArgs are the manager arguments the chart renders with its default values
// (charts/connector-mcp/values.yaml: leader election on, concurrency 4 for deployments and 4
// for profiles, the verified-pack store in the release namespace, retry 30 s, reverify
// 10 m ...), except the endpoints, which listen on loopback ports here, and the two development
// flags an inline profile and a loopback MCP server need.
func chartManagerArgs(leaderNS, metricsAddr, probeAddr, pprofAddr string) []string {
	return []string{
		"--leader-elect=true",
		"--leader-election-namespace=" + leaderNS,
		"--metrics-bind-address=" + metricsAddr,
		"--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr,
		"--pprof-bind-address=" + pprofAddr,
		"--graceful-shutdown-timeout=30s",
		"--exchange-timeout=30s",
		"--max-response-bytes=16777216",
		"--reverify-interval=10m",
		"--reverify-jitter=0.1",
		"--freeze-timeout=60s",
		"--probe-timeout=5s",
		"--retry-interval=30s",
		"--max-tools=2000",
		"--concurrency=4",
		"--profile-concurrency=4",
		"--credential-refresh-skew=5m",
		"--verified-pack-namespace=" + leaderNS,
		"--verified-pack-sweep-interval=1h",
		"--skip-provenance-unsafe",
		"--allow-loopback-unsafe",
	}
}

// freeLoopbackAddr returns a loopback address with a port free at the time of the call.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startManagerProcess starts cmd/manager against this control plane, leader election lease in
// leaderNS, and waits until it is ready (its readiness probe answers). extra arguments follow
// the chart's. The process gets SIGTERM when the test ends.
func startManagerProcess(t testing.TB, leaderNS string, extra ...string) *managerProcess {
	t.Helper()
	metricsAddr, probeAddr, pprofAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	return startProcess(t, managerBinary(t), append(chartManagerArgs(leaderNS, metricsAddr, probeAddr, pprofAddr), extra...), metricsAddr, probeAddr, pprofAddr)
}

// startProcess starts bin with args against this control plane's kubeconfig and waits until its
// /readyz on probeAddr answers; its metrics are served on metricsAddr, pprof on pprofAddr.
func startProcess(t testing.TB, bin string, args []string, metricsAddr, probeAddr, pprofAddr string) *managerProcess {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "process.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), bin, args...) //nolint:gosec // a binary this test built, with the test's own flags
	cmd.Env = []string{"KUBECONFIG=" + kc, "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start %s: %v", filepath.Base(bin), err)
	}
	p := &managerProcess{cmd: cmd, metricsURL: "http://" + metricsAddr + "/metrics", pprofURL: "http://" + pprofAddr + "/debug/pprof/", logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	exited := false
	ready := pollUntil(pollInterval, 2*time.Minute, func() bool {
		select {
		case <-p.exited:
			exited = true
			return true
		default:
		}
		return httpOK("http://" + probeAddr + "/readyz")
	})
	switch {
	case exited:
		t.Fatalf("%s exited before it was ready:\n%s", filepath.Base(bin), p.logTail())
	case !ready:
		t.Fatalf("%s was not ready within 2 minutes:\n%s", filepath.Base(bin), p.logTail())
	}
	return p
}

// stop sends SIGTERM and waits for the exit (SIGKILL after the chart's graceful shutdown
// timeout and a margin).
func (p *managerProcess) stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop within 45 s of SIGTERM", filepath.Base(p.cmd.Path))
	}
}

// logTail is the last 4 KiB of the manager's log.
func (p *managerProcess) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func httpOK(url string) bool {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// procStats are a process's figures from /proc/PID.
type procStats struct {
	// RSSBytes and HWMBytes are VmRSS and VmHWM (peak RSS) of /proc/PID/status.
	RSSBytes, HWMBytes int64
	// CPUSeconds is utime+stime of /proc/PID/stat (user and system CPU since the start).
	CPUSeconds float64
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on Linux.
const clockTicks = 100

// readProcStats reads the figures of process pid.
func readProcStats(pid int) (procStats, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStats{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStats{}, err
	}
	return parseProcStats(status, stat)
}

// errProcFormat is returned by parseProcStats for /proc text it cannot read.
var errProcFormat = errors.New("unexpected /proc format")

// parseProcStats reads VmRSS and VmHWM (kB) from a /proc/PID/status text and utime+stime
// (fields 14 and 15, counted after the parenthesised command name, which may hold spaces) from
// a /proc/PID/stat text.
func parseProcStats(status, stat []byte) (procStats, error) {
	var s procStats
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return procStats{}, fmt.Errorf("%w: %s %q", errProcFormat, f[0], f[1])
		}
		switch f[0] {
		case "VmRSS:":
			s.RSSBytes, haveRSS = kb<<10, true
		case "VmHWM:":
			s.HWMBytes, haveHWM = kb<<10, true
		}
	}
	if !haveRSS || !haveHWM {
		return procStats{}, fmt.Errorf("%w: status has no VmRSS or VmHWM", errProcFormat)
	}
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return procStats{}, fmt.Errorf("%w: stat has no command name", errProcFormat)
	}
	// After "pid (comm)": field 3 (state) is rest[0], so field k is rest[k-3].
	rest := strings.Fields(string(stat[end+1:]))
	if len(rest) < 13 {
		return procStats{}, fmt.Errorf("%w: stat has %d fields after the command name", errProcFormat, len(rest))
	}
	var ticks int64
	for _, v := range rest[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return procStats{}, fmt.Errorf("%w: stat time %q", errProcFormat, v)
		}
		ticks += n
	}
	s.CPUSeconds = float64(ticks) / clockTicks
	return s, nil
}

// stats reads the manager process's figures.
func (p *managerProcess) stats(t testing.TB) procStats {
	t.Helper()
	s, err := readProcStats(p.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("manager /proc: %v", err)
	}
	return s
}

// scrape returns the manager's metrics exposition.
func (p *managerProcess) scrape(t testing.TB) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, p.metricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape the manager's metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// errNoSample is returned by sumSamples when no sample of the metric matches.
var errNoSample = errors.New("no matching sample")

// sumSamples sums the samples of metric name in a Prometheus text exposition whose labels
// include every pair of match (label values without escapes, as controller-runtime's are).
func sumSamples(text []byte, name string, match map[string]string) (float64, error) {
	var sum float64
	found := false
	for _, line := range strings.Split(string(text), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		metric, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		base, labels, _ := strings.Cut(metric, "{")
		if base != name {
			continue
		}
		have := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				have[k] = strings.Trim(v, `"`)
			}
		}
		all := true
		for k, v := range match {
			if have[k] != v {
				all = false
			}
		}
		if !all {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("sample %q: %w", line, err)
		}
		sum += f
		found = true
	}
	if !found {
		return 0, fmt.Errorf("%w of %s %v", errNoSample, name, match)
	}
	return sum, nil
}

// managerCounters are the manager's own counters from one scrape.
type managerCounters struct {
	// DeploymentReconciles is controller_runtime_reconcile_total of the servicedeployment
	// controller, every result.
	DeploymentReconciles float64
	// WriteRequests is the API write requests (POST, PUT, PATCH, DELETE) of the manager's
	// clients, events and lease renewals included (client-go's rest_client_requests_total).
	WriteRequests float64
	// Requests is every API request of the manager's clients, reads included.
	Requests float64
}

// counters scrapes the manager's counters.
func (p *managerProcess) counters(t testing.TB) managerCounters {
	t.Helper()
	body := p.scrape(t)
	var c managerCounters
	var err error
	// No sample yet: the controller has reconciled nothing.
	if c.DeploymentReconciles, err = sumSamples(body, "controller_runtime_reconcile_total", map[string]string{"controller": "servicedeployment"}); err != nil && !errors.Is(err, errNoSample) {
		t.Fatalf("manager metrics: %v", err)
	}
	if c.Requests, err = sumSamples(body, "rest_client_requests_total", nil); err != nil {
		t.Fatalf("manager metrics: %v", err)
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		v, err := sumSamples(body, "rest_client_requests_total", map[string]string{"method": m})
		if err != nil && !errors.Is(err, errNoSample) {
			t.Fatalf("manager metrics: %v", err)
		}
		c.WriteRequests += v
	}
	return c
}
