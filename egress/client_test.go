package egress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// TestStreamingRequestBound: the streaming client refuses a known oversized body before
// sending and stops an unknown-length body at the bound.
func TestStreamingRequestBound(t *testing.T) {
	var rec recorder
	var received atomic.Int64
	srv := serveOn(t, "127.0.0.5", rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Store(n)
	})))
	p := inCluster(srv.URL)
	p.MaxRequestBytes = 1 << 20
	c, err := NewHTTPClient(p)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("u", 2<<20)
	_, err = call(c, http.MethodPost, srv.URL+"/upload", big)
	if !errors.Is(err, ErrRequestTooLarge) || rec.count("") != 0 {
		t.Fatalf("known length: %v (server saw %d)", err, rec.count(""))
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/upload", io.NopCloser(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := c.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("unknown length: got %v, want request_too_large", err)
	}
	if received.Load() > 1<<20 {
		t.Fatalf("server received %d bytes, over the bound", received.Load())
	}
	if _, err := call(c, http.MethodPost, srv.URL+"/upload", big[:1<<20]); err != nil {
		t.Fatalf("body of exactly the bound: %v", err)
	}
	if received.Load() != 1<<20 {
		t.Fatalf("server received %d bytes", received.Load())
	}
}

// TestStreamingDeclaredLengthOverBound: a declared Content-Length over the bound is refused
// before the body is read.
func TestStreamingDeclaredLengthOverBound(t *testing.T) {
	srv := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4096")
		_, _ = io.WriteString(w, strings.Repeat("d", 4096))
	}))
	p := inCluster(srv.URL)
	p.MaxResponseBytes = 1024
	c, err := NewHTTPClient(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(c, http.MethodGet, srv.URL+"/", ""); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("got %v, want response_too_large", err)
	}
}

func TestParseCIDRsAndAPIServerPrefixes(t *testing.T) {
	got, err := ParseCIDRs([]string{"10.1.2.3/8", "192.168.1.1", "fd00::/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.168.1.1/32", "fd00::/8", "::1/128"}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", ""} {
		if _, err := ParseCIDRs([]string{bad}); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%q: got %v, want ErrInvalidPolicy", bad, err)
		}
	}
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
	ps := APIServerPrefixes(func(k string) string { return env[k] }, "172.18.0.2", "::ffff:172.18.0.3", "not-an-ip")
	if len(ps) != 3 || ps[0] != netip.MustParsePrefix("10.96.0.1/32") || ps[2] != netip.MustParsePrefix("172.18.0.3/32") {
		t.Fatalf("APIServerPrefixes: %v", ps)
	}
	p := IPPolicy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}, DenyPrefixes: ps}
	if err := p.Check(netip.MustParseAddrPort("172.18.0.2:6443")); refusalOf(err) != RefusalDestination {
		t.Fatalf("apiserver endpoint inside an allowed range: %v", err)
	}
	if err := p.Check(netip.MustParseAddrPort("172.18.0.9:443")); err != nil {
		t.Fatalf("other address of the allowed range: %v", err)
	}
}

// Policy.Deny is read at dial time: its prefixes are refused (apiserver) even inside the
// allow-list, and an unreadable deny list refuses the dial (policy_unavailable); the server
// sees nothing. Twin: an empty deny list lets the same request through.
func TestDialTimeDenyList(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	for _, tc := range []struct {
		name, reason string
		deny         DenySource
	}{
		{"denied prefix", "apiserver", DenyFunc(func(context.Context) ([]netip.Prefix, error) {
			return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/29")}, nil
		})},
		{"unreadable", "policy_unavailable", DenyFunc(func(context.Context) ([]netip.Prefix, error) { return nil, errors.New("boom") })},
		{"empty (twin)", "", DenyFunc(func(context.Context) ([]netip.Prefix, error) { return nil, nil })},
	} {
		p := inCluster(srv.URL)
		p.Deny = tc.deny
		c, err := NewHTTPClient(p)
		if err != nil {
			t.Fatal(err)
		}
		before := rec.count("")
		_, err = call(c, http.MethodPost, srv.URL+"/x", "{}")
		if tc.reason == "" {
			if err != nil || rec.count("") != before+1 {
				t.Fatalf("%s: err = %v, requests %d", tc.name, err, rec.count("")-before)
			}
			continue
		}
		var de *DestinationError
		if !errors.As(err, &de) || de.Reason != tc.reason || de.Refusal() != RefusalDestination {
			t.Fatalf("%s: err = %v, want destination_refused (%s)", tc.name, err, tc.reason)
		}
		if rec.count("") != before {
			t.Fatalf("%s: the server saw the request", tc.name)
		}
	}
}
