package egress

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// mapStore is an in-memory SecretStore (the Kubernetes one lives in internal/k8sbinding and is
// tested there and in the operator's envtest suites).
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == "" {
		delete(s.m, key)
		return
	}
	s.m[key] = []byte(value)
}

func (s *mapStore) Get(_ context.Context, ref CredentialRef) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[ref.Name+"/"+ref.Key]
	if !ok {
		return nil, &CredentialError{Ref: ref, Reason: "key not found"}
	}
	return append([]byte(nil), v...), nil
}

// TestBearerPerExchange: the bearer is fetched for every exchange (a rotated Secret is
// picked up at once), sent only to the bound server, replaces a caller-set Authorization, is
// zeroed after use, and never appears in errors.
func TestBearerPerExchange(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	c := &mapStore{m: map[string][]byte{"tok/t": []byte("first-token")}}
	var handedOut [][]byte
	store := SecretStoreFunc(func(ctx context.Context, ref CredentialRef) ([]byte, error) {
		v, err := c.Get(ctx, ref)
		handedOut = append(handedOut, v)
		return v, err
	})
	p := inCluster(srv.URL + "/mcp")
	p.Credential = &CredentialRef{Name: "tok", Key: "t"}
	p.Secrets = store
	tr := newTransport(t, p)

	req := post(t, srv.URL+"/mcp", `{}`)
	req.Header.Set("Authorization", "Bearer caller-supplied")
	if _, err := tr.Exchange(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Authorization") != "Bearer caller-supplied" {
		t.Fatal("the caller's request was modified")
	}
	c.set("tok/t", "rotated-token")
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`)); err != nil {
		t.Fatal(err)
	}
	got := rec.all()
	if len(got) != 2 || got[0].auth != "Bearer first-token" || got[1].auth != "Bearer rotated-token" {
		t.Fatalf("server saw %+v", got)
	}
	for i, v := range handedOut {
		if strings.Trim(string(v), "\x00") != "" {
			t.Errorf("credential copy %d not zeroed after the request was assembled", i)
		}
	}

	// A missing Secret fails the exchange before anything is sent, naming only the ref.
	c.set("tok/t", "")
	_, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`))
	if !errors.Is(err, ErrCredentialUnavailable) || strings.Contains(err.Error(), "rotated-token") {
		t.Fatalf("missing key: %v", err)
	}
	if len(rec.all()) != 2 {
		t.Fatal("a request was sent without its credential")
	}
}

// TestBearerRejectsHeaderInjection: a Secret value that is not a token is refused.
func TestBearerRejectsHeaderInjection(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	p := inCluster(srv.URL)
	p.Credential = &CredentialRef{Name: "tok", Key: "t"}
	p.Secrets = SecretStoreFunc(func(context.Context, CredentialRef) ([]byte, error) {
		return []byte("abc\r\nX-Injected: 1"), nil
	})
	_, err := newTransport(t, p).Exchange(context.Background(), get(t, srv.URL+"/"))
	var ce *CredentialError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "abc") {
		t.Fatalf("got %v, want a credential error without the value", err)
	}
	if len(rec.all()) != 0 {
		t.Fatal("request sent")
	}
}
