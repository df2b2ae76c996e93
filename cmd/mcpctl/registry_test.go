package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	// runMainEnv makes the test binary run mcpctl's main with its arguments.
	runMainEnv = "MCPCTL_TEST_RUN_MAIN"
	// defaultClientEnv makes the test binary GET the URL it names with http.DefaultClient.
	defaultClientEnv = "MCPCTL_TEST_DEFAULT_CLIENT_GET"
)

// defaultClientGet issues one GET with http.DefaultClient: what the registry client did before
// it was built from egress. It returns 0 whatever the outcome; the proxy counts what it saw.
func defaultClientGet(u string) int {
	// The URL is the test's own constant; this is the twin showing what the proxy would see.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil) //nolint:gosec // G704: the test's own URL
	if err != nil {
		return 1
	}
	if resp, err := http.DefaultClient.Do(req); err == nil { //nolint:gosec // G704: the test's own URL
		resp.Body.Close()
	}
	return 0
}

// proxyEnv starts a counting HTTP proxy on loopback and returns the environment that names it
// for every scheme, and its counter.
func proxyEnv(t *testing.T) ([]string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "proxy says no", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	env := []string{"HTTP_PROXY=" + proxy.URL, "HTTPS_PROXY=" + proxy.URL, "http_proxy=" + proxy.URL, "https_proxy=" + proxy.URL,
		"NO_PROXY=", "no_proxy=", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	return env, &n
}

// registryRef is a pack reference on a registry that is neither loopback (which the proxy
// environment never covers) nor reachable: TEST-NET-3.
const registryRef = "203.0.113.7/team/acme@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TestRegistryClientIgnoresProxyEnvironment: with HTTP(S)_PROXY set, "pack pull|verify" never
// send anything to the proxy: the registry client is egress's, not http.DefaultClient. Run as a
// child process so the environment is read fresh.
func TestRegistryClientIgnoresProxyEnvironment(t *testing.T) {
	env, n := proxyEnv(t)

	// Must-fail twin first: in the same environment http.DefaultClient does use the proxy.
	twin := exec.CommandContext(t.Context(), os.Args[0]) //nolint:gosec // G204: the test binary itself
	twin.Env = append(env, defaultClientEnv+"=https://203.0.113.7/v2/")
	if out, err := twin.CombinedOutput(); err != nil {
		t.Fatalf("twin: %v: %s", err, out)
	}
	if n.Load() == 0 {
		t.Fatal("http.DefaultClient did not use the proxy: the environment is not what this test needs")
	}
	n.Store(0)

	for _, args := range [][]string{
		{"pack", "pull", registryRef},
		{"pack", "verify", registryRef, "--key", "testdata/cosign.pub", "--skip-provenance-unsafe"},
		{"pack", "pull", registryRef, "--egress", "hosted"},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], args...) //nolint:gosec // G204: the test binary itself
		cmd.Env = append(env, runMainEnv+"=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitRefused || !strings.HasPrefix(stderr.String(), "refused: destination_refused\n") {
			t.Fatalf("%v: %v, stderr %q; want exit 3, refused: destination_refused", args, err, stderr.String())
		}
		if n.Load() != 0 {
			t.Fatalf("%v: the proxy received %d request(s)", args, n.Load())
		}
	}
}

// TestRegistryDefaultPolicy: the default-mode registry client refuses cloud metadata and
// link-local addresses at dial time (http.DefaultClient would have dialed them), while a
// loopback registry named as loopback stays reachable (TestPackPushSignVerifyWithKey).
func TestRegistryDefaultPolicy(t *testing.T) {
	for _, host := range []string{"169.254.169.254", "[fd00:ec2::254]", "169.254.10.1", "0.0.0.0:5000"} {
		r := runCLI(t, nil, "pack", "pull", host+"/team/acme@sha256:"+strings.Repeat("0", 64))
		r.wantRefusal(t, "destination_refused")
	}
}

// TestRegistryLoopbackOnlyForLoopbackRegistry: the default-mode client of a remote registry never
// dials loopback (a redirect to the user's own machine is refused at dial time); the client of a
// registry named as loopback does.
func TestRegistryLoopbackOnlyForLoopbackRegistry(t *testing.T) {
	srv, n := loopbackServer(t)
	var f egressFlags
	remote, err := f.registryHTTPClient(&url.URL{Scheme: "https", Host: "registry.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var tlsHits atomic.Int32
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { tlsHits.Add(1) }))
	t.Cleanup(tlsSrv.Close)
	err = send(remote, http.MethodGet, tlsSrv.URL+"/v2/")
	var stderr bytes.Buffer
	if code := exitCode(&stderr, err); code != exitRefused || !strings.HasPrefix(stderr.String(), "refused: destination_refused\n") {
		t.Fatalf("remote registry's client to loopback: exit %d, stderr %q", code, stderr.String())
	}
	if tlsHits.Load() != 0 {
		t.Fatalf("loopback server received %d request(s)", tlsHits.Load())
	}
	u, _ := url.Parse(srv.URL)
	local, err := f.registryHTTPClient(&url.URL{Scheme: "http", Host: u.Host})
	if err != nil {
		t.Fatal(err)
	}
	if err := send(local, http.MethodGet, srv.URL+"/v2/"); err != nil || n.Load() != 1 {
		t.Fatalf("loopback registry's client: %v, %d request(s)", err, n.Load())
	}
}
