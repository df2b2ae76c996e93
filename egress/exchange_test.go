package egress

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
)

// TestPlainHTTPOnlyToLoopbackUnbound: a port with no bound endpoint marks each plain-http
// request for the dial check itself; a name resolving to a public address is refused at dial time
// (scheme_refused) and never connected to. Twin: the same unbound port lets an https request to
// that address through the dial check.
func TestPlainHTTPOnlyToLoopbackUnbound(t *testing.T) {
	h := &hook{}
	tr := newTransport(t, Policy{IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, Resolver: newStubResolver()})
	if tr.plainBound {
		t.Fatal("an unbound port must not judge every dial as plain http")
	}
	tr.dialer.connect = h.connect
	_, err := tr.Exchange(context.Background(), post(t, "http://public.example/mcp", `{}`))
	if refusalOf(err) != RefusalScheme {
		t.Fatalf("plain http to a public peer: got %v, want scheme_refused", err)
	}
	if l := h.leaks(); len(l) != 0 {
		t.Fatalf("dialed %v", l)
	}
	if _, err := tr.Exchange(context.Background(), post(t, "https://public.example/mcp", `{}`)); !errors.Is(err, errRecorded) {
		t.Fatalf("https to a public peer: got %v, want the dial to pass", err)
	}
}

// TestCallerHeadersUntouched: the port sends its own copy of the headers when it changes them
// (Accept-Encoding and Proxy-Authorization dropped, the bearer set) and leaves the caller's
// request as it was; a request it has nothing to change in goes out with the caller's headers.
func TestCallerHeadersUntouched(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := serveOn(t, "127.0.0.5", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	p := inCluster(srv.URL + "/mcp")
	p.Credential = &CredentialRef{Name: "tok", Key: "t"}
	p.Secrets = &mapStore{m: map[string][]byte{"tok/t": []byte("port-token")}}
	tr := newTransport(t, p)
	req := post(t, srv.URL+"/mcp", `{}`)
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("Proxy-Authorization", "Basic cHJveHk6c2VjcmV0")
	req.Header.Set("X-Trace", "1")
	if _, err := tr.Exchange(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Accept-Encoding") != "identity" || req.Header.Get("Proxy-Authorization") == "" || req.Header.Get("Authorization") != "" {
		t.Fatalf("the caller's headers were changed: %v", req.Header)
	}
	mu.Lock()
	sent := got[0]
	mu.Unlock()
	if sent.Get("Proxy-Authorization") != "" || sent.Get("Accept-Encoding") == "identity" || sent.Get("Authorization") != "Bearer port-token" || sent.Get("X-Trace") != "1" {
		t.Fatalf("server saw %v", sent)
	}

	// Twin: with nothing to change, the caller's headers go out as they are.
	plain := newTransport(t, inCluster(srv.URL+"/mcp"))
	req = post(t, srv.URL+"/mcp", `{}`)
	req.Header.Set("X-Trace", "2")
	if _, err := plain.Exchange(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	sent = got[1]
	mu.Unlock()
	if sent.Get("X-Trace") != "2" || sent.Get("Authorization") != "" || req.Header.Get("Authorization") != "" {
		t.Fatalf("server saw %v; caller has %v", sent, req.Header)
	}
}
