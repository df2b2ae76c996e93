package egress

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func secret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// TestKubernetesSecretStore uses controller-runtime's fake client; the operator's envtest
// suites exercise the same store against a real apiserver.
func TestKubernetesSecretStore(t *testing.T) {
	var gets atomic.Int32
	var lastKey client.ObjectKey
	c := fake.NewClientBuilder().WithObjects(
		secret("team-a", "mcp-token", map[string][]byte{"token": []byte("tok-a\n"), "other": []byte("not-this")}),
		secret("team-a", "empty", map[string][]byte{"token": {}}),
		secret("team-b", "only-in-b", map[string][]byte{"token": []byte("tok-b")}),
	).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			lastKey = key
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			t.Error("the store listed Secrets; it must only get the named one")
			return errors.New("list refused")
		},
	}).Build()
	s := NewKubernetesSecretStore(c, "team-a")

	v, err := s.Get(context.Background(), CredentialRef{Name: "mcp-token", Key: "token"})
	if err != nil || string(v) != "tok-a\n" {
		t.Fatalf("named key: %q, %v", v, err)
	}
	if lastKey != (client.ObjectKey{Namespace: "team-a", Name: "mcp-token"}) {
		t.Fatalf("read %v, want team-a/mcp-token", lastKey)
	}
	v[0] = 'X' // the caller zeroes the value; the store must have handed out a copy
	if again, _ := s.Get(context.Background(), CredentialRef{Name: "mcp-token", Key: "token"}); string(again) != "tok-a\n" {
		t.Fatalf("store returned shared memory: %q", again)
	}

	for name, tc := range map[string]struct {
		ref    CredentialRef
		reason string
	}{
		"missing key":            {CredentialRef{Name: "mcp-token", Key: "absent"}, "key not found"},
		"missing secret":         {CredentialRef{Name: "nope", Key: "token"}, "secret not found"},
		"other namespace's name": {CredentialRef{Name: "only-in-b", Key: "token"}, "secret not found"},
		"empty value":            {CredentialRef{Name: "empty", Key: "token"}, "empty"},
		"path in name":           {CredentialRef{Name: "team-b/only-in-b", Key: "token"}, "invalid secret name"},
		"invalid key":            {CredentialRef{Name: "mcp-token", Key: "a/b"}, "invalid secret key"},
		"empty name":             {CredentialRef{Key: "token"}, "invalid secret name"},
	} {
		before := gets.Load()
		_, err := s.Get(context.Background(), tc.ref)
		var ce *CredentialError
		if !errors.As(err, &ce) || ce.Reason != tc.reason || !errors.Is(err, ErrCredentialUnavailable) {
			t.Errorf("%s: got %v, want credential error %q", name, err, tc.reason)
		}
		if strings.Contains(err.Error(), "tok-") || strings.Contains(err.Error(), "not-this") {
			t.Errorf("%s: error carries a secret value: %v", name, err)
		}
		if strings.HasPrefix(tc.reason, "invalid") && gets.Load() != before {
			t.Errorf("%s: invalid reference reached the API", name)
		}
	}
	if _, err := NewKubernetesSecretStore(c, "").Get(context.Background(), CredentialRef{Name: "mcp-token", Key: "token"}); !errors.Is(err, ErrCredentialUnavailable) {
		t.Fatalf("store without namespace: %v", err)
	}
}

// TestBearerPerExchange: the bearer is fetched for every exchange (a rotated Secret is
// picked up at once), sent only to the bound server, replaces a caller-set Authorization, is
// zeroed after use, and never appears in errors.
func TestBearerPerExchange(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	c := fake.NewClientBuilder().WithObjects(secret("ns", "tok", map[string][]byte{"t": []byte("first-token")})).Build()
	var handedOut [][]byte
	store := SecretStoreFunc(func(ctx context.Context, ref CredentialRef) ([]byte, error) {
		v, err := NewKubernetesSecretStore(c, "ns").Get(ctx, ref)
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
	sec := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "tok"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["t"] = []byte("rotated-token")
	if err := c.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
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
	sec.Data = map[string][]byte{}
	if err := c.Update(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
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
