package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// oauthEnv is a CLI environment whose XDG state lives in a fresh temporary directory.
func oauthEnv(t *testing.T) (*cliEnv, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	vars := map[string]string{"XDG_STATE_HOME": state, "HOME": t.TempDir()}
	var stdout, stderr bytes.Buffer
	env := &cliEnv{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	return env, &stdout, &stderr, filepath.Join(state, "connector-mcp", "oauth")
}

// playBrowser replaces the browser opener for one test: it approves at the authorization
// server and delivers the redirect to mcpctl's loopback listener.
func playBrowser(t *testing.T) *int {
	t.Helper()
	opened := new(int)
	prev := openBrowser
	openBrowser = func(_ *cliEnv, authURL string) {
		*opened++
		go func() {
			u, err := oauthtest.Approve(authURL)
			if err != nil {
				t.Errorf("approve: %v", err)
				return
			}
			// The listener may close as soon as this delivery ends the flow; the test judges
			// the outcome, not this request.
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u.String(), nil)
			if err != nil {
				t.Errorf("redirect: %v", err)
				return
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	t.Cleanup(func() { openBrowser = prev })
	return opened
}

func storedFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "credentials", "*.json"))
	return files
}

func TestLoginStoresPrivateTokenUsedWithoutPrompt(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	env, stdout, stderr, dir := oauthEnv(t)
	opened := playBrowser(t)
	ctx := context.Background()

	if code := run(ctx, env, []string{"login", "--url", rs.URL, "--timeout", "30s"}); code != exitOK {
		t.Fatalf("login exit %d: %s", code, stderr)
	}
	if *opened != 1 || !strings.Contains(stderr.String(), "/authorize?") || !strings.Contains(stderr.String(), "Waiting up to") {
		t.Errorf("login did not show the authorization URL and a progress line: %s", stderr)
	}
	var view credentialView
	if err := json.Unmarshal(stdout.Bytes(), &view); err != nil || view.Resource != rs.URL || view.Issuer != as.Issuer {
		t.Fatalf("login output %s (%v)", stdout, err)
	}
	files := storedFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("stored files: %v", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential file mode %v (%v), want 0600", fi.Mode(), err)
	}
	cred, err := oauth.NewXDGStore(dir).Load(ctx, oauth.Key{Resource: rs.URL, Issuer: as.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{stdout.String(), stderr.String()} {
		if strings.Contains(out, cred.AccessToken) || strings.Contains(out, cred.RefreshToken) || strings.Contains(out, cred.ClientSecret) {
			t.Fatal("login printed a token or secret")
		}
	}

	// auth status lists it, without token values.
	stdout.Reset()
	if code := run(ctx, env, []string{"auth", "status"}); code != exitOK {
		t.Fatalf("auth status exit %d: %s", code, stderr)
	}
	var status struct {
		Credentials []credentialView `json:"credentials"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &status); err != nil || len(status.Credentials) != 1 ||
		status.Credentials[0].Issuer != as.Issuer || status.Credentials[0].Expiry == nil || !status.Credentials[0].Refreshable {
		t.Fatalf("auth status: %s (%v)", stdout, err)
	}
	if strings.Contains(stdout.String(), cred.AccessToken) || strings.Contains(stdout.String(), cred.RefreshToken) {
		t.Fatal("auth status printed a token")
	}

	// The handler discover|snapshot|call use presents the stored token without prompting.
	before := as.Counts()
	h, err := oauthHandlerFor(ctx, env, rs.URL)
	if err != nil || h == nil {
		t.Fatalf("oauthHandlerFor: %v, %v", h, err)
	}
	client, err := oauthHTTPClient(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: rs.URL, OAuthHandler: h, HTTPClient: client}, nil)
	if err != nil {
		t.Fatalf("connect with the stored credential: %v", err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	if after := as.Counts(); after.Authorizations != before.Authorizations || *opened != 1 {
		t.Errorf("using the stored credential prompted again: %+v -> %+v", before, after)
	}

	// Must fail: another server gets no handler (nothing stored for it).
	if h, err := oauthHandlerFor(ctx, env, strings.Replace(rs.URL, "/mcp", "/other", 1)); h != nil || err != nil {
		t.Fatalf("another resource got a handler: %v, %v", h, err)
	}

	// logout forgets it; afterwards there is no handler.
	stdout.Reset()
	if code := run(ctx, env, []string{"logout", "--url", rs.URL}); code != exitOK || !strings.Contains(stdout.String(), `"removed": 1`) {
		t.Fatalf("logout exit %d: %s %s", code, stdout, stderr)
	}
	if len(storedFiles(t, dir)) != 0 {
		t.Fatal("logout left the credential file")
	}
	if h, err := oauthHandlerFor(ctx, env, rs.URL); h != nil || err != nil {
		t.Fatalf("after logout: %v, %v", h, err)
	}
}

func TestAuthStatusRefusesWorldReadableFile(t *testing.T) {
	env, _, stderr, dir := oauthEnv(t)
	store := oauth.NewXDGStore(dir)
	c := &oauth.Credential{Key: oauth.Key{Resource: "https://mcp.example/mcp", Issuer: "https://as.example"}, //nolint:gosec // G101: a fixture token, not a credential
		TokenURL: "https://as.example/token", ClientID: "c", AccessToken: "at-fixture", Updated: time.Now()}
	if err := store.Save(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	// Twin: the private file is listed.
	if code := run(context.Background(), env, []string{"auth", "status"}); code != exitOK {
		t.Fatalf("auth status exit %d: %s", code, stderr)
	}
	if err := os.Chmod(storedFiles(t, dir)[0], 0o644); err != nil { //nolint:gosec // G302: the insecure mode is what the test is about
		t.Fatal(err)
	}
	if code := run(context.Background(), env, []string{"auth", "status"}); code != exitRefused ||
		!strings.Contains(stderr.String(), "refused: credential_store_insecure") {
		t.Fatalf("world-readable credential: exit %d, %s", code, stderr)
	}
	if _, err := oauthHandlerFor(context.Background(), env, c.Resource); err == nil {
		t.Fatal("oauthHandlerFor used a world-readable credential file")
	}
}

func TestLoginDeniedAndUsage(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	env, _, stderr, dir := oauthEnv(t)
	playBrowser(t)
	as.DenyNext()
	if code := run(context.Background(), env, []string{"login", "--url", rs.URL}); code != exitRefused ||
		!strings.Contains(stderr.String(), "refused: authorization_denied") || strings.Contains(stderr.String(), "SERVER-PROSE") {
		t.Fatalf("denied login: exit %d, %s", code, stderr)
	}
	if len(storedFiles(t, dir)) != 0 {
		t.Fatal("a denied login stored something")
	}
	for _, args := range [][]string{
		{"login"},
		{"login", "--url", rs.URL, "--client-id", "a", "--client-metadata-url", "https://c.example/m.json"},
		{"login", "--url", "ftp://x/y"},
		{"login", "--url", rs.URL, "--client-secret-env", "X"},
		{"logout"},
		{"auth"},
		{"auth", "list"},
	} {
		stderr.Reset()
		if code := run(context.Background(), env, args); code != exitUsage {
			t.Errorf("%q: exit %d, want usage: %s", args, code, stderr)
		}
	}
}

// Done-when of the OAuth work: `mcpctl login` stores a private token, and a following
// `mcpctl snapshot` succeeds without prompting; without the login, snapshot is refused with
// login_required; after logout, the same.
func TestLoginThenSnapshotWithoutPrompt(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	env, stdout, stderr, _ := oauthEnv(t)
	opened := playBrowser(t)
	ctx := context.Background()

	// Must fail first: nothing stored, snapshot may not prompt.
	if code := run(ctx, env, []string{"snapshot", "--url", rs.URL}); code == exitOK {
		t.Fatalf("snapshot of a protected server without credentials succeeded: %s", stdout)
	}
	if *opened != 0 || as.Counts().Authorizations != 0 {
		t.Fatal("snapshot started an authorization")
	}

	stderr.Reset()
	if code := run(ctx, env, []string{"login", "--url", rs.URL}); code != exitOK {
		t.Fatalf("login exit %d: %s", code, stderr)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(ctx, env, []string{"snapshot", "--url", rs.URL}); code != exitOK {
		t.Fatalf("snapshot after login: exit %d: %s", code, stderr)
	}
	var snap struct {
		Digest string            `json:"digest"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &snap); err != nil || len(snap.Tools) != 2 || snap.Digest == "" {
		t.Fatalf("snapshot output: %.300s (%v)", stdout, err)
	}
	if *opened != 1 || as.Counts().Authorizations != 1 {
		t.Fatalf("snapshot prompted: opened %d, %+v", *opened, as.Counts())
	}

	if code := run(ctx, env, []string{"logout", "--url", rs.URL}); code != exitOK {
		t.Fatalf("logout: %s", stderr)
	}
	stderr.Reset()
	if code := run(ctx, env, []string{"snapshot", "--url", rs.URL}); code == exitOK {
		t.Fatal("snapshot succeeded after logout")
	}
}
