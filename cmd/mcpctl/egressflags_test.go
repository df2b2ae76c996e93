package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/pflag"
)

func parseEgress(t *testing.T, args ...string) *egressFlags {
	t.Helper()
	var f egressFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return &f
}

// loopbackServer counts requests on 127.0.0.1.
func loopbackServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// send issues one request with hc and closes the response.
func send(hc *http.Client, method, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestEgressFlagsDefaultMode(t *testing.T) {
	hc, err := parseEgress(t).httpClient(&url.URL{Scheme: "https", Host: "example.com", Path: "/mcp"})
	if err != nil || hc != nil {
		t.Fatalf("default mode: client %v, err %v; want nil, nil (caller's default)", hc, err)
	}
}

func TestEgressFlagsUsage(t *testing.T) {
	u := &url.URL{Scheme: "https", Host: "example.com", Path: "/mcp"}
	for _, args := range [][]string{
		{"--egress", "open"},
		{"--allow-loopback"},
		{"--allow-cidr", "10.0.0.0/8"},
		{"--egress", "hosted", "--allow-cidr", "not-a-cidr"},
	} {
		_, err := parseEgress(t, args...).httpClient(u)
		var stderr bytes.Buffer
		if code := exitCode(&stderr, err); code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestEgressFlagsHostedRefusesLoopback: the operator's policy refuses a loopback server with
// exit 3 and "refused: <name>"; nothing reaches the server. --allow-loopback lets it through.
func TestEgressFlagsHostedRefusesLoopback(t *testing.T) {
	srv, n := loopbackServer(t)
	u, _ := url.Parse(srv.URL + "/mcp")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--egress", "hosted"}, "refused: scheme_refused"},                                // plain http
		{[]string{"--egress", "hosted", "--allow-cidr", "127.0.0.0/8"}, "refused: scheme_refused"}, // CIDR never opens loopback
	} {
		_, err := parseEgress(t, tc.args...).httpClient(u)
		var stderr bytes.Buffer
		if code := exitCode(&stderr, err); code != exitRefused || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitRefused, tc.want)
		}
	}
	// https to loopback: the dial-time check refuses it.
	hu := &url.URL{Scheme: "https", Host: u.Host, Path: "/mcp"}
	hc, err := parseEgress(t, "--egress", "hosted").httpClient(hu)
	if err != nil {
		t.Fatal(err)
	}
	err = send(hc, http.MethodPost, hu.String())
	var stderr bytes.Buffer
	if code := exitCode(&stderr, err); code != exitRefused || !strings.Contains(stderr.String(), "refused: destination_refused") {
		t.Fatalf("https to loopback: exit %d, stderr %q", code, stderr.String())
	}
	if n.Load() != 0 {
		t.Fatalf("server received %d requests", n.Load())
	}

	hc, err = parseEgress(t, "--egress", "hosted", "--allow-loopback").httpClient(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := send(hc, http.MethodPost, u.String()); err != nil {
		t.Fatalf("--allow-loopback: %v", err)
	}
	if n.Load() != 1 {
		t.Fatalf("server received %d requests, want 1", n.Load())
	}
	// The bound client refuses any other host.
	err = send(hc, http.MethodGet, "http://127.0.0.2:1/mcp")
	stderr.Reset()
	if code := exitCode(&stderr, err); code != exitRefused || !strings.Contains(stderr.String(), "refused: destination_refused") {
		t.Fatalf("other host: exit %d, stderr %q", code, stderr.String())
	}
}

// TestEgressFlagsHostedRegistry: a bare registry host gets the unbound guarded client.
func TestEgressFlagsHostedRegistry(t *testing.T) {
	srv, n := loopbackServer(t)
	host := srv.Listener.Addr().(*net.TCPAddr).String()
	hc, err := parseEgress(t, "--egress", "hosted", "--allow-loopback").httpClient(&url.URL{Scheme: "http", Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if err := send(hc, http.MethodGet, "http://"+host+"/v2/"); err != nil {
		t.Fatalf("registry GET: %v", err)
	}
	if n.Load() != 1 {
		t.Fatalf("registry saw %d requests", n.Load())
	}
	hc, err = parseEgress(t, "--egress", "hosted").httpClient(&url.URL{Scheme: "https", Host: host})
	if err != nil {
		t.Fatal(err)
	}
	err = send(hc, http.MethodGet, "https://"+host+"/v2/")
	var stderr bytes.Buffer
	if code := exitCode(&stderr, err); code != exitRefused || !strings.Contains(stderr.String(), "refused: destination_refused") {
		t.Fatalf("hosted registry on loopback: exit %d, stderr %q", code, stderr.String())
	}
}
