package egress

import (
	"context"
	"net/http"
	"sync"
	"testing"
)

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
