package oauth

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testCred(resource, issuer, token string) *Credential {
	return &Credential{
		Key:         Key{Resource: resource, Issuer: issuer},
		TokenURL:    issuer + "/token",
		ClientID:    "client",
		AccessToken: token, RefreshToken: "rt-" + token, TokenType: "Bearer",
		Scopes:  []string{"a"},
		Expiry:  time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		Updated: time.Now().UTC(),
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestDefaultDirFollowsXDG(t *testing.T) {
	env := map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d, _ := DefaultDir(get); d != "/x/state/connector-mcp/oauth" {
		t.Errorf("with XDG_STATE_HOME: %s", d)
	}
	env["XDG_STATE_HOME"] = "relative/ignored"
	if d, _ := DefaultDir(get); d != "/home/u/.local/state/connector-mcp/oauth" {
		t.Errorf("with a relative XDG_STATE_HOME: %s", d)
	}
	env["HOME"] = ""
	if d, err := DefaultDir(get); !errors.Is(err, ErrNoStateDir) {
		t.Errorf("without HOME: %q, %v", d, err)
	}
}

func TestXDGStoreRoundTripWithPrivateModes(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "state", "connector-mcp", "oauth")
	s := NewXDGStore(root)
	if _, err := s.Load(ctx, Key{"r", "i"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty store: %v", err)
	}
	c := testCred("https://mcp.example/mcp", "https://as.example", "tok1")
	if err := s.Save(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRegistration(ctx, &Registration{Issuer: "https://as.example", ClientID: "id", ClientSecret: "sec", RedirectURIs: []string{"http://127.0.0.1/cb"}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "credentials"), filepath.Join(root, "clients")} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s mode %o, want 700", d, m)
		}
	}
	if m := mode(t, s.credPath(c.Key)); m != 0o600 {
		t.Errorf("credential file mode %o, want 600", m)
	}
	if m := mode(t, s.regPath("https://as.example")); m != 0o600 {
		t.Errorf("registration file mode %o, want 600", m)
	}
	got, err := s.Load(ctx, c.Key)
	if err != nil || got.AccessToken != "tok1" || got.RefreshToken != "rt-tok1" || !got.Expiry.Equal(c.Expiry) {
		t.Fatalf("load: %v, %v", got, err)
	}
	reg, err := s.LoadRegistration(ctx, "https://as.example")
	if err != nil || reg.ClientSecret != "sec" {
		t.Fatalf("registration: %v", err)
	}
	// The same resource under another issuer is another key.
	if _, err := s.Load(ctx, Key{c.Resource, "https://other.example"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other issuer: %v", err)
	}
	if err := s.Save(ctx, testCred("https://mcp.example/mcp", "https://other.example", "tok2")); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, "https://mcp.example/mcp")
	if err != nil || len(all) != 2 || all[0].AccessToken != "tok2" {
		t.Fatalf("list: %d, %v", len(all), err)
	}
	if err := s.Delete(ctx, c.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, c.Key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestXDGStoreSurvivesCrashMidWrite(t *testing.T) {
	ctx := context.Background()
	s := NewXDGStore(filepath.Join(t.TempDir(), "oauth"))
	old := testCred("https://mcp.example/mcp", "https://as.example", "old")
	if err := s.Save(ctx, old); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("simulated crash")
	var tmp string
	s.beforeRename = func(name string) error { tmp = name; return crash }
	if err := s.Save(ctx, testCred(old.Resource, old.Issuer, "new")); !errors.Is(err, crash) {
		t.Fatalf("save: %v", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the crash should leave the temporary file behind: %v", err)
	}
	s.beforeRename = nil
	got, err := s.Load(ctx, old.Key)
	if err != nil || got.AccessToken != "old" {
		t.Fatalf("after a crash mid-write: %v, %v; want the previous record", got, err)
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("list after crash: %d, %v", len(all), err)
	}
	// Twin: without the crash the new record replaces the old one.
	if err := s.Save(ctx, testCred(old.Resource, old.Issuer, "new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, old.Key); got.AccessToken != "new" {
		t.Fatal("the completed write was not visible")
	}
}

// loosen sets the insecure mode a test expects the store to refuse.
func loosen(path string, mode fs.FileMode) error {
	return os.Chmod(path, mode)
}

func TestXDGStoreRefusesUnsafeFiles(t *testing.T) {
	ctx := context.Background()
	c := testCred("https://mcp.example/mcp", "https://as.example", "secret-token-value")
	cases := []struct {
		name   string
		spoil  func(s *XDGStore, path string) error
		refuse string
	}{
		{"world readable file", func(_ *XDGStore, p string) error { return loosen(p, 0o644) }, RefusalStoreInsecure},
		{"group readable file", func(_ *XDGStore, p string) error { return loosen(p, 0o640) }, RefusalStoreInsecure},
		{"group writable directory", func(s *XDGStore, _ string) error { return loosen(s.dir, 0o770) }, RefusalStoreInsecure},
		{"corrupt file", func(_ *XDGStore, p string) error {
			return os.WriteFile(p, []byte(`{"access_token": "secret-token-value", `), 0o600)
		}, RefusalStoreCorrupt},
		{"unknown field", func(_ *XDGStore, p string) error {
			return os.WriteFile(p, []byte(`{"resource":"https://mcp.example/mcp","issuer":"https://as.example","evil":1}`), 0o600)
		}, RefusalStoreCorrupt},
		{"case variant of a field", func(_ *XDGStore, p string) error {
			return os.WriteFile(p, []byte(`{"resource":"https://mcp.example/mcp","issuer":"https://as.example","Issuer":"https://as.example"}`), 0o600)
		}, RefusalStoreCorrupt},
		{"duplicate field", func(_ *XDGStore, p string) error {
			return os.WriteFile(p, []byte(`{"resource":"https://mcp.example/mcp","issuer":"https://as.example","issuer":"https://as.example"}`), 0o600)
		}, RefusalStoreCorrupt},
		{"record of another key", func(s *XDGStore, p string) error {
			other := testCred("https://elsewhere.example/mcp", "https://as.example", "x")
			if err := s.Save(ctx, other); err != nil {
				return err
			}
			return os.Rename(s.credPath(other.Key), p)
		}, RefusalStoreCorrupt},
		{"symbolic link", func(_ *XDGStore, p string) error {
			target := p + ".real"
			if err := os.Rename(p, target); err != nil {
				return err
			}
			return os.Symlink(target, p)
		}, RefusalStoreNotRegular},
		{"foreign owner", func(s *XDGStore, _ string) error { s.uid = os.Getuid() + 1; return nil }, RefusalStoreForeignOwner},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewXDGStore(filepath.Join(t.TempDir(), "oauth"))
			if err := s.Save(ctx, c); err != nil {
				t.Fatal(err)
			}
			// Twin: the untouched store loads.
			if _, err := s.Load(ctx, c.Key); err != nil {
				t.Fatalf("before spoiling: %v", err)
			}
			if err := tc.spoil(s, s.credPath(c.Key)); err != nil {
				t.Fatal(err)
			}
			for op, err := range map[string]error{
				"load": func() error { _, err := s.Load(ctx, c.Key); return err }(),
				"list": func() error { _, err := s.List(ctx, ""); return err }(),
			} {
				var se *StoreError
				if !errors.As(err, &se) || se.Refusal() != tc.refuse || !errors.Is(err, ErrUnsafeStore) {
					t.Fatalf("%s: got %v, want refusal %s", op, err, tc.refuse)
				}
				if strings.Contains(err.Error(), "secret-token-value") {
					t.Fatalf("%s: error shows file content: %v", op, err)
				}
			}
		})
	}
}
