package egress

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func jsonHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	})
}

// TestInClusterAllowedByCIDR: the allowed in-cluster case. Only loopback is reachable on this
// machine, so the "cluster range" is the explicit allow-list entry 127.0.0.5/32 with the
// LoopbackByCIDRUnsafe knob (loopback treated as a private range). Its twin stands a server at
// 127.0.0.6, outside the list: refused at dial time, the server sees nothing.
func TestInClusterAllowedByCIDR(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{"ok":true}`)))
	tr := newTransport(t, inCluster(srv.URL+"/mcp"))
	resp, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`))
	if err != nil {
		t.Fatalf("allowed exchange: %v", err)
	}
	if resp.StatusCode != 200 || string(resp.Body) != `{"ok":true}` {
		t.Fatalf("got %d %q", resp.StatusCode, resp.Body)
	}
	if rec.count("") != 1 {
		t.Fatalf("server saw %d requests, want 1", rec.count(""))
	}

	var other recorder
	srv6 := serveOn(t, "127.0.0.6", other.wrap(jsonHandler(`{}`)))
	tr6 := newTransport(t, inCluster(srv6.URL+"/mcp"))
	_, err = tr6.Exchange(context.Background(), post(t, srv6.URL+"/mcp", `{}`))
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("127.0.0.6: got %v, want destination_refused (loopback)", err)
	}
	if other.count("") != 0 {
		t.Fatalf("refused server saw %d requests", other.count(""))
	}
}

// TestSchemeRefused: only https (http only to loopback when explicitly allowed).
func TestSchemeRefused(t *testing.T) {
	hosted := Policy{Resolver: newStubResolver()}
	for _, ep := range []string{
		"http://public.example/mcp", "ftp://public.example/", "file:///etc/passwd", "gopher://public.example:70/",
		"ws://public.example/", "HTTP://public.example/", "javascript://public.example/",
	} {
		p := hosted
		p.Endpoint = ep
		_, err := NewTransport(p)
		var se *SchemeError
		if !errors.As(err, &se) || se.Refusal() != RefusalScheme {
			t.Errorf("endpoint %s: got %v, want scheme_refused", ep, err)
		}
	}
	// A bound https port refuses an http request to the same host.
	p := hosted
	p.Endpoint = "https://public.example/mcp"
	tr := newTransport(t, p)
	if _, err := tr.Exchange(context.Background(), post(t, "http://public.example/mcp", `{}`)); refusalOf(err) != RefusalScheme {
		t.Errorf("http request on an https binding: got %v, want scheme_refused", err)
	}
	// Unbound port (no Endpoint): every non-https scheme is refused per request.
	tr = newTransport(t, hosted)
	for _, u := range []string{"http://public.example/", "ftp://public.example/"} {
		if _, err := tr.Exchange(context.Background(), get(t, u)); refusalOf(err) != RefusalScheme {
			t.Errorf("%s on an unbound port: got %v, want scheme_refused", u, err)
		}
	}
}

// TestPlainHTTPOnlyToLoopback: with loopback allowed, plain http is accepted by the URL check,
// but the dial insists on a loopback peer — a name resolving to a public address is refused
// at dial time (scheme_refused) and never connected to, whether the port is bound to a plain-http
// endpoint (it judges every dial as plain http) or unbound (it judges each request's scheme).
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	for _, c := range []struct {
		name, endpoint string
		bound          bool
	}{
		{"bound to a plain-http endpoint", "http://public.example/mcp", true},
		{"unbound", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &hook{}
			p := Policy{Endpoint: c.endpoint, IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, Resolver: newStubResolver()}
			tr := newTransport(t, p)
			if tr.plainBound != c.bound || tr.dialer.Policy.plainHTTP != c.bound {
				t.Fatalf("plainBound %v, dial policy plainHTTP %v; want %v", tr.plainBound, tr.dialer.Policy.plainHTTP, c.bound)
			}
			tr.dialer.connect = h.connect
			_, err := tr.Exchange(context.Background(), post(t, "http://public.example/mcp", `{}`))
			if refusalOf(err) != RefusalScheme {
				t.Fatalf("plain http to a public peer: got %v, want scheme_refused", err)
			}
			if l := h.leaks(); len(l) != 0 {
				t.Fatalf("dialed %v", l)
			}
			// Twin: the same request over https passes the dial check (recorded, not connected).
			if c.endpoint != "" {
				p.Endpoint = "https://public.example/mcp"
				tr = newTransport(t, p)
				tr.dialer.connect = h.connect
			}
			if _, err := tr.Exchange(context.Background(), post(t, "https://public.example/mcp", `{}`)); !errors.Is(err, errRecorded) {
				t.Fatalf("https to a public peer: got %v, want the dial to pass", err)
			}
		})
	}
}

// TestBindingRefused: a bound port reaches exactly its scheme, host and port.
func TestBindingRefused(t *testing.T) {
	var recA, recB recorder
	a := serveOn(t, "127.0.0.5", recA.wrap(jsonHandler(`{}`)))
	b := serveOn(t, "127.0.0.7", recB.wrap(jsonHandler(`{}`)))
	tr := newTransport(t, inCluster(a.URL+"/mcp"))
	aPort := a.URL[strings.LastIndex(a.URL, ":")+1:]
	for _, u := range []string{
		b.URL + "/mcp",                        // other host, allowed by the IP policy
		"http://127.0.0.5:1/mcp",              // other port
		"http://localhost:" + aPort + "/",     // other spelling of a host
		"http://u:p@127.0.0.5:" + aPort + "/", // userinfo
	} {
		_, err := tr.Exchange(context.Background(), post(t, u, `{}`))
		if refusalOf(err) != RefusalDestination {
			t.Errorf("%s: got %v, want destination_refused", u, err)
		}
	}
	if _, err := tr.Exchange(context.Background(), post(t, a.URL+"/other/path", `{}`)); err != nil {
		t.Errorf("bound host, other path: %v", err)
	}
	if recB.count("") != 0 || recA.count("") != 1 {
		t.Fatalf("A saw %d, B saw %d requests; want 1 and 0", recA.count(""), recB.count(""))
	}
}

func redirectTo(target string, code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, target, code)
	})
}

// TestRedirects: off by default, capped, re-checked per hop.
func TestRedirects(t *testing.T) {
	var recFinal recorder
	mux := http.NewServeMux()
	mux.Handle("/final", recFinal.wrap(jsonHandler(`{"final":true}`)))
	mux.Handle("/hop", redirectTo("/final", http.StatusTemporaryRedirect))
	mux.Handle("/loop", redirectTo("/loop", http.StatusFound))
	a := serveOn(t, "127.0.0.5", mux)

	// Off by default.
	tr := newTransport(t, inCluster(a.URL))
	_, err := tr.Exchange(context.Background(), post(t, a.URL+"/hop", `{"x":1}`))
	var re *RedirectError
	if !errors.As(err, &re) || re.Reason != "redirects disabled" {
		t.Fatalf("default policy: got %v, want redirect_refused (disabled)", err)
	}
	if recFinal.count("") != 0 {
		t.Fatal("redirect followed although disabled")
	}
	// Allowed: followed on the same binding, body re-sent (307).
	p := inCluster(a.URL)
	p.MaxRedirects = 3
	tr = newTransport(t, p)
	resp, err := tr.Exchange(context.Background(), post(t, a.URL+"/hop", `{"x":1}`))
	if err != nil || string(resp.Body) != `{"final":true}` {
		t.Fatalf("allowed redirect: %v %v", resp, err)
	}
	// Capped.
	_, err = tr.Exchange(context.Background(), get(t, a.URL+"/loop"))
	if !errors.As(err, &re) || re.Reason != "too many redirects" {
		t.Fatalf("loop: got %v, want redirect_refused (too many)", err)
	}
	if _, err := NewTransport(Policy{MaxRedirects: MaxRedirectsCap + 1}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("MaxRedirects over the cap: got %v", err)
	}
}

// TestRedirectLeavingBindingRefused: a bound port never follows a redirect to another host,
// even one the IP policy would allow; the other host sees nothing.
func TestRedirectLeavingBindingRefused(t *testing.T) {
	var recB recorder
	b := serveOn(t, "127.0.0.7", recB.wrap(jsonHandler(`{}`)))
	a := serveOn(t, "127.0.0.5", redirectTo(b.URL+"/steal", http.StatusTemporaryRedirect))
	p := inCluster(a.URL)
	p.MaxRedirects = 3
	tr := newTransport(t, p)
	_, err := tr.Exchange(context.Background(), post(t, a.URL+"/mcp", `{}`))
	if refusalOf(err) != RefusalRedirect {
		t.Fatalf("got %v, want redirect_refused", err)
	}
	if recB.count("") != 0 {
		t.Fatal("redirect target received a request")
	}
}

// TestRedirectToBlockedTargetRefusedAtDial: an unbound client (the OCI registry case) follows
// redirects, but each hop is judged at dial time: a redirect to loopback outside the
// allow-list, or to the metadata address, is refused and nothing reaches it.
func TestRedirectToBlockedTargetRefusedAtDial(t *testing.T) {
	s := newSink(t, "127.0.0.1")
	blocked := "http://127.0.0.1:" + strconv.Itoa(int(s.port())) + "/latest/meta-data"
	for _, tc := range []struct{ target, reason string }{
		{blocked, "loopback"},
		{"http://169.254.169.254/latest/meta-data", "metadata"},
		{"http://[::ffff:a9fe:a9fe]/latest/meta-data", "metadata"},
	} {
		a := serveOn(t, "127.0.0.5", redirectTo(tc.target, http.StatusFound))
		h := &hook{}
		p := Policy{IP: inClusterIP(), MaxRedirects: 5, Timeout: 5 * time.Second}
		c, err := NewHTTPClient(p)
		if err != nil {
			t.Fatal(err)
		}
		c.Transport.(*streamingTransport).t.dialer.connect = h.connect
		resp, err := c.Do(get(t, a.URL+"/v2/"))
		if resp != nil {
			resp.Body.Close()
		}
		var de *DestinationError
		if !errors.As(err, &de) || de.Reason != tc.reason {
			t.Errorf("redirect to %s: got %v, want destination_refused (%s)", tc.target, err, tc.reason)
		}
		if l := h.leaks(); len(l) != 0 {
			t.Errorf("redirect to %s dialed %v", tc.target, l)
		}
	}
	if n, b := s.settle(t); n != 0 || b != 0 {
		t.Fatalf("blocked sink received %d connections, %d bytes", n, b)
	}
}

// TestAuthorizationNotForwardedAcrossHosts: net/http keeps Authorization on a redirect to a
// subdomain; the port drops it on any change of host.
func TestAuthorizationNotForwardedAcrossHosts(t *testing.T) {
	var recB recorder
	b := serveOn(t, "127.0.0.7", recB.wrap(jsonHandler(`{}`)))
	bPort := b.URL[strings.LastIndex(b.URL, ":")+1:]
	a := serveOn(t, "127.0.0.5", redirectTo("http://blobs.registry.test:"+bPort+"/blob", http.StatusFound))
	aPort := a.URL[strings.LastIndex(a.URL, ":")+1:]
	res := newStubResolver()
	res.names["registry.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.5")}
	res.names["blobs.registry.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.7")}
	c, err := NewHTTPClient(Policy{IP: inClusterIP(), Resolver: res, MaxRedirects: 2})
	if err != nil {
		t.Fatal(err)
	}
	req := get(t, "http://registry.test:"+aPort+"/v2/x/blobs/sha256:00")
	req.Header.Set("Authorization", "Bearer registry-token")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("redirected GET: %v", err)
	}
	resp.Body.Close()
	got := recB.all()
	if len(got) != 1 || got[0].auth != "" {
		t.Fatalf("blob host saw %+v; want one request without Authorization", got)
	}
}

// TestHTTPSToHTTPRedirectRefused: a redirect never downgrades https to http.
func TestHTTPSToHTTPRedirectRefused(t *testing.T) {
	var recPlain recorder
	plain := serveOn(t, "127.0.0.1", recPlain.wrap(jsonHandler(`{}`)))
	srv := serveTLS(t, redirectTo(plain.URL+"/x", http.StatusFound))
	p := Policy{Endpoint: srv.URL, IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, MaxRedirects: 3,
		TLSClientConfig: &tls.Config{RootCAs: srv.certPool}}
	tr := newTransport(t, p)
	_, err := tr.Exchange(context.Background(), get(t, srv.URL+"/"))
	var re *RedirectError
	if !errors.As(err, &re) || re.Reason != "https to http" {
		t.Fatalf("got %v, want redirect_refused (https to http)", err)
	}
	if recPlain.count("") != 0 {
		t.Fatal("plain server received the downgraded request")
	}
	// Twin: the same TLS server answering directly is reachable.
	ok := serveTLS(t, jsonHandler(`{"tls":true}`))
	p.Endpoint, p.TLSClientConfig = ok.URL, &tls.Config{RootCAs: ok.certPool}
	tr = newTransport(t, p)
	resp, err := tr.Exchange(context.Background(), get(t, ok.URL+"/"))
	if err != nil || string(resp.Body) != `{"tls":true}` {
		t.Fatalf("https exchange: %v", err)
	}
}

// TestResponseBound64MiB: a 64 MiB body stops at the bound (exchange and streaming client);
// a body of exactly the bound passes.
func TestResponseBound64MiB(t *testing.T) {
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i < 64; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := serveOn(t, "127.0.0.5", big)
	tr := newTransport(t, inCluster(srv.URL))
	_, err := tr.Exchange(context.Background(), get(t, srv.URL+"/"))
	var te *TooLargeError
	if !errors.As(err, &te) || te.Refusal() != RefusalResponseTooLarge || te.Limit != DefaultMaxResponseBytes {
		t.Fatalf("exchange: got %v, want response_too_large at the default bound", err)
	}
	c, err := NewHTTPClient(inCluster(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(get(t, srv.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !errors.Is(err, ErrResponseTooLarge) || n != DefaultMaxResponseBytes {
		t.Fatalf("streaming: read %d bytes, err %v; want exactly the bound then response_too_large", n, err)
	}

	exact := serveOn(t, "127.0.0.5", jsonHandler(strings.Repeat("b", 1024)))
	p := inCluster(exact.URL)
	p.MaxResponseBytes = 1024
	if r, err := newTransport(t, p).Exchange(context.Background(), get(t, exact.URL+"/")); err != nil || len(r.Body) != 1024 {
		t.Fatalf("body of exactly the bound: %v", err)
	}
	p.MaxResponseBytes = 1023
	if _, err := newTransport(t, p).Exchange(context.Background(), get(t, exact.URL+"/")); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("one byte over: got %v", err)
	}
}

// TestGzipBomb: the response bound applies after decompression.
func TestGzipBomb(t *testing.T) {
	// 64 concatenated gzip members of 1 MiB of zeros each: 64 MiB once decoded (net/http's
	// gzip reader reads multistream), about 64 KiB on the wire.
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 1<<20))
	zw.Close()
	var zbuf bytes.Buffer
	for i := 0; i < 64; i++ {
		zbuf.Write(member.Bytes())
	}
	bomb := zbuf.Bytes()
	const bound = 1 << 20
	if len(bomb) >= bound {
		t.Fatalf("bomb is %d bytes compressed; the test needs it under the bound", len(bomb))
	}
	srv := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "gzip only", http.StatusNotAcceptable)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bomb)
	}))
	p := inCluster(srv.URL)
	p.MaxResponseBytes = bound
	req := get(t, srv.URL+"/")
	req.Header.Set("Accept-Encoding", "identity") // the port negotiates compression itself
	_, err := newTransport(t, p).Exchange(context.Background(), req)
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("gzip bomb (%d bytes compressed): got %v, want response_too_large", len(bomb), err)
	}
	// Twin: a small gzip body is decoded and passes.
	var small bytes.Buffer
	sw := gzip.NewWriter(&small)
	_, _ = io.WriteString(sw, `{"small":true}`)
	sw.Close()
	srv2 := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(small.Bytes())
	}))
	p.Endpoint = srv2.URL
	resp, err := newTransport(t, p).Exchange(context.Background(), get(t, srv2.URL+"/"))
	if err != nil || string(resp.Body) != `{"small":true}` {
		t.Fatalf("small gzip body: %v", err)
	}
}

// TestSlowBodyDeadline: a body that trickles forever is stopped by the exchange deadline.
func TestSlowBodyDeadline(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		for {
			if _, err := io.WriteString(w, " "); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	srv := serveOn(t, "127.0.0.5", slow)
	p := inCluster(srv.URL)
	p.Timeout = 300 * time.Millisecond
	_, err := newTransport(t, p).Exchange(context.Background(), get(t, srv.URL+"/"))
	var de *DeadlineError
	if !errors.As(err, &de) || de.Refusal() != RefusalDeadline || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exchange: got %v, want deadline_exceeded", err)
	}
	c, err := NewHTTPClient(p)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(get(t, srv.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("streaming: got %v, want deadline_exceeded", err)
	}
	// Headers that never come hit the same deadline.
	hang := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	p.Endpoint = hang.URL
	if _, err := newTransport(t, p).Exchange(context.Background(), get(t, hang.URL+"/")); !errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("hanging headers: got %v", err)
	}
}

// TestHeaderFlood: response and request headers are bounded.
func TestHeaderFlood(t *testing.T) {
	flood := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := strings.Repeat("v", 100)
		for i := 0; i < 5000; i++ {
			w.Header().Add(fmt.Sprintf("X-Flood-%d", i), v)
		}
		w.WriteHeader(200)
	})
	srv := serveOn(t, "127.0.0.5", flood)
	_, err := newTransport(t, inCluster(srv.URL)).Exchange(context.Background(), get(t, srv.URL+"/"))
	var te *TooLargeError
	if !errors.As(err, &te) || te.Refusal() != RefusalHeaderTooLarge {
		t.Fatalf("response header flood: got %v, want header_too_large", err)
	}
	var rec recorder
	ok := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	tr := newTransport(t, inCluster(ok.URL))
	req := get(t, ok.URL+"/")
	for i := 0; i < 1000; i++ {
		req.Header.Add(fmt.Sprintf("X-Req-%d", i), strings.Repeat("r", 100))
	}
	if _, err := tr.Exchange(context.Background(), req); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("request header flood: got %v, want header_too_large", err)
	}
	if rec.count("") != 0 {
		t.Fatal("oversized request headers were sent")
	}
	if _, err := tr.Exchange(context.Background(), get(t, ok.URL+"/")); err != nil {
		t.Fatalf("normal headers: %v", err)
	}
}

// TestRequestBound: an oversized request body is refused before anything is sent.
func TestRequestBound(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	p := inCluster(srv.URL)
	p.MaxRequestBytes = 1 << 20
	tr := newTransport(t, p)
	big := strings.Repeat("x", 1<<20+1)
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/", big)); refusalOf(err) != RefusalRequestTooLarge {
		t.Fatalf("known length: got %v, want request_too_large", err)
	}
	req := post(t, srv.URL+"/", "")
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(big)), -1
	if _, err := tr.Exchange(context.Background(), req); refusalOf(err) != RefusalRequestTooLarge {
		t.Fatalf("unknown length: got %v, want request_too_large", err)
	}
	if rec.count("") != 0 {
		t.Fatal("oversized request reached the server")
	}
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/", big[:1<<20])); err != nil {
		t.Fatalf("request of exactly the bound: %v", err)
	}
}

// TestNoProxyFromEnvironment: proxy variables are ignored.
func TestNoProxyFromEnvironment(t *testing.T) {
	proxy := newSink(t, "127.0.0.1")
	pu := "http://127.0.0.1:" + strconv.Itoa(int(proxy.port()))
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		t.Setenv(k, pu)
	}
	t.Setenv("NO_PROXY", "")
	srv := serveOn(t, "127.0.0.5", jsonHandler(`{"direct":true}`))
	resp, err := newTransport(t, inCluster(srv.URL)).Exchange(context.Background(), get(t, srv.URL+"/"))
	if err != nil || string(resp.Body) != `{"direct":true}` {
		t.Fatalf("direct exchange: %v", err)
	}
	if n, _ := proxy.settle(t); n != 0 {
		t.Fatalf("proxy from the environment received %d connections", n)
	}
}

// TestErrorsCarryNoURLSecrets: failures name host and port, never path or query.
func TestErrorsCarryNoURLSecrets(t *testing.T) {
	s := newSink(t, "127.0.0.5")
	port := strconv.Itoa(int(s.port()))
	s.ln.Close() // connection refused from now on
	u := "http://127.0.0.5:" + port + "/mcp/s3cr3t-path?token=s3cr3t-query"
	_, err := newTransport(t, inCluster(u)).Exchange(context.Background(), post(t, u, `{"password":"s3cr3t-body"}`))
	if err == nil {
		t.Fatal("exchange with a closed port succeeded")
	}
	var xe *ExchangeError
	if !errors.As(err, &xe) {
		t.Fatalf("got %T %v, want *ExchangeError", err, err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error carries URL or body secrets: %v", err)
	}
}

// TestInvalidPolicies: constructors refuse unusable policies.
func TestInvalidPolicies(t *testing.T) {
	ref := &CredentialRef{Name: "tok", Key: "token"}
	for name, p := range map[string]Policy{
		"negative bound":           {MaxResponseBytes: -1},
		"userinfo endpoint":        {Endpoint: "https://u:p@public.example/"}, //nolint:gosec // fixture: userinfo must be refused
		"relative endpoint":        {Endpoint: "/mcp"},
		"credential without store": {Endpoint: "https://public.example/", Credential: ref},
		"credential without bind":  {Credential: ref, Secrets: SecretStoreFunc(nil)},
		"bad credential ref":       {Endpoint: "https://public.example/", Credential: &CredentialRef{Name: "../x", Key: "k"}, Secrets: SecretStoreFunc(nil)},
		"bad loopback mode":        {IP: IPPolicy{Loopback: 7}},
		"TLS verification off":     {TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // must be refused
	} {
		if _, err := NewTransport(p); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: got %v, want ErrInvalidPolicy", name, err)
		}
	}
}

// TestUnrequestedEncodingRefused: a body in an encoding the port did not ask for (which it
// would hand on undecoded, outside the bound) is refused; gzip is decoded (TestGzipBomb).
func TestUnrequestedEncodingRefused(t *testing.T) {
	srv := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "deflate")
		_, _ = w.Write([]byte{0x4b, 0x04, 0x00})
	}))
	_, err := newTransport(t, inCluster(srv.URL)).Exchange(context.Background(), get(t, srv.URL+"/"))
	if !errors.Is(err, ErrUnrequestedEncoding) {
		t.Fatalf("got %v, want ErrUnrequestedEncoding", err)
	}
}

// TestHostOverrideIgnored: a caller-set Host header cannot steer the request to another
// virtual host behind the bound address.
func TestHostOverrideIgnored(t *testing.T) {
	var host string
	srv := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host = r.Host }))
	req := get(t, srv.URL+"/")
	req.Host = "internal-admin.svc"
	if _, err := newTransport(t, inCluster(srv.URL)).Exchange(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(srv.URL, "http://"); host != want {
		t.Fatalf("server saw Host %q, want %q", host, want)
	}
}

// TestInClusterAllowedByCIDRIPv6: the same allowed case over IPv6 (::1/128 allow-listed), and
// its twin: an IPv4 loopback server outside that list is refused.
func TestInClusterAllowedByCIDRIPv6(t *testing.T) {
	ip := IPPolicy{Loopback: LoopbackByCIDRUnsafe, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("::1/128")}}
	var rec6, rec4 recorder
	srv6 := serveOn(t, "::1", rec6.wrap(jsonHandler(`{"v6":true}`)))
	resp, err := newTransport(t, Policy{Endpoint: srv6.URL, IP: ip}).Exchange(context.Background(), get(t, srv6.URL+"/"))
	if err != nil || string(resp.Body) != `{"v6":true}` {
		t.Fatalf("allow-listed ::1: %v", err)
	}
	srv4 := serveOn(t, "127.0.0.5", rec4.wrap(jsonHandler(`{}`)))
	_, err = newTransport(t, Policy{Endpoint: srv4.URL, IP: ip}).Exchange(context.Background(), get(t, srv4.URL+"/"))
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" || rec4.count("") != 0 {
		t.Fatalf("127.0.0.5 outside the list: %v (server saw %d)", err, rec4.count(""))
	}
}
