package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

const testBearer = "s3cret.Token_value-42~+/=="

// bearerServer is a go-sdk MCP server on loopback that accepts only "Bearer <want>" and records
// the Authorization header of every request.
type bearerServer struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func (b *bearerServer) headers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

func newBearerServer(t *testing.T, want string) *bearerServer {
	t.Helper()
	b := &bearerServer{}
	h := mcptest.HTTPHandler(mcptest.NewServer("gated", mcptest.DefaultTools()), mcptest.Modern)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		b.mu.Lock()
		b.seen = append(b.seen, got)
		b.mu.Unlock()
		if got != "Bearer "+want {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "SERVER PROSE: go away", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL + "/mcp"
	return b
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBearerFileEveryServerVerb: discover, snapshot and call present the file's token (trailing
// newline trimmed) and succeed; nothing prints it.
func TestBearerFileEveryServerVerb(t *testing.T) {
	srv := newBearerServer(t, testBearer)
	dir := t.TempDir()
	for _, content := range []string{testBearer, testBearer + "\n", testBearer + "\r\n"} {
		file := writeFile(t, dir, "token", content)
		for _, verb := range [][]string{{"discover"}, {"snapshot"}, {"call", "--tool", "add", "--args", `{"a":1,"b":2}`}} {
			args := append(append([]string{}, verb...), "--url", srv.URL, "--bearer-file", file)
			code, out, errOut := runServerCLI(t, nil, args...)
			if code != exitOK {
				t.Fatalf("%v with %q: exit %d: %s", verb, content, code, errOut)
			}
			if strings.Contains(out+errOut, "s3cret") {
				t.Fatalf("%v printed the token", verb)
			}
		}
	}
	// profile check takes it too: record a profile through the gate, then check it.
	tok := writeFile(t, dir, "token", testBearer)
	_, snapOut, _ := runServerCLI(t, nil, "snapshot", "--url", srv.URL, "--bearer-file", tok)
	_, prof, _ := runServerCLI(t, nil, "profile", "init", "--snapshot", writeFile(t, dir, "snap.json", snapOut))
	profPath := writeFile(t, dir, "profile.yaml", strings.ReplaceAll(prof, "effect: unreviewed", "effect: read"))
	if code, out, errOut := runServerCLI(t, nil, "profile", "check", "--profile", profPath, "--url", srv.URL, "--bearer-file", tok); code != exitOK || !strings.Contains(out, `"drift": false`) {
		t.Fatalf("profile check with --bearer-file: exit %d, %q: %s", code, out, errOut)
	}
	// With --egress hosted the bearer goes through the exchange port bound to the server.
	if code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", srv.URL, "--bearer-file", tok, "--egress", "hosted", "--allow-loopback"); code != exitOK {
		t.Fatalf("hosted egress with --bearer-file: exit %d: %s", code, errOut)
	}
	// A named pipe works too (e.g. --bearer-file <(vault read ...)).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			_, _ = f.WriteString(testBearer + "\n")
			f.Close()
		}
	}()
	if code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", srv.URL, "--bearer-file", fifo); code != exitOK {
		t.Fatalf("bearer from a named pipe: exit %d: %s", code, errOut)
	}
	code, out, _ := runServerCLI(t, nil, "call", "--url", srv.URL, "--bearer-file", writeFile(t, dir, "token", testBearer), "--tool", "add", "--args", `{"a":1,"b":2}`)
	if code != exitOK || !strings.Contains(out, `"text":"3"`) {
		t.Fatalf("call through the gate: exit %d, %q", code, out)
	}
	for _, h := range srv.headers() {
		if h != "Bearer "+testBearer {
			t.Fatalf("server saw Authorization %q", h)
		}
	}
	// Must-fail twin: without --bearer-file the same server answers 401 and the verb fails.
	if code, _, _ := runServerCLI(t, nil, "snapshot", "--url", srv.URL); code == exitOK {
		t.Fatal("the gate let a request without a bearer through")
	}
}

// TestBearerFileRefusals: each unusable file is refused by name (exit 3) before anything is
// sent; a token the server rejects is refused as bearer_rejected; the token never appears.
func TestBearerFileRefusals(t *testing.T) {
	srv := newBearerServer(t, testBearer)
	dir := t.TempDir()
	cases := []struct {
		name, file, refusal string
		reaches             bool
	}{
		{"missing", filepath.Join(dir, "nope"), RefusalBearerFileMissing, false},
		{"directory", dir, RefusalBearerFileMissing, false},
		{"empty", writeFile(t, dir, "empty", ""), RefusalBearerFileEmpty, false},
		{"only newline", writeFile(t, dir, "nl", "\n\r\n"), RefusalBearerFileEmpty, false},
		{"too large", writeFile(t, dir, "big", strings.Repeat("a", MaxBearerFileBytes+1)), RefusalBearerFileTooLarge, false},
		{"inner space", writeFile(t, dir, "space", "s3cret token"), RefusalBearerFileInvalid, false},
		{"header injection", writeFile(t, dir, "inject", "s3cret\r\nX-Evil: 1\n"), RefusalBearerFileInvalid, false},
		{"leading space", writeFile(t, dir, "lead", " s3cret"), RefusalBearerFileInvalid, false},
		{"wrong token", writeFile(t, dir, "wrong", "s3cret-but-wrong\n"), RefusalBearerRejected, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(srv.headers())
			code, out, errOut := runServerCLI(t, nil, "snapshot", "--url", srv.URL, "--bearer-file", c.file)
			if code != exitRefused || !strings.HasPrefix(errOut, "refused: "+c.refusal+"\n") || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want refused: %s", code, out, errOut, c.refusal)
			}
			if strings.Contains(errOut, "s3cret") || strings.Contains(errOut, "PROSE") {
				t.Fatalf("stderr carries the token or server prose: %q", errOut)
			}
			if reached := len(srv.headers()) > before; reached != c.reaches {
				t.Fatalf("server reached: %v, want %v", reached, c.reaches)
			}
		})
	}
	// A bearer only travels over https or to loopback: http elsewhere is refused before any dial.
	code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", "http://mcp.example.com/mcp", "--bearer-file", writeFile(t, dir, "ok", testBearer))
	if code != exitRefused || !strings.HasPrefix(errOut, "refused: insecure_transport\n") {
		t.Fatalf("http to a remote host: exit %d: %s", code, errOut)
	}
	// A stdio server takes no bearer.
	if code, _, errOut := runServerCLI(t, nil, append([]string{"snapshot", "--bearer-file", filepath.Join(dir, "ok")}, stdioArgs()...)...); code != exitUsage {
		t.Fatalf("stdio with --bearer-file: exit %d: %s", code, errOut)
	}
}

// TestBearerNeverFollowsRedirect: a server that redirects a request carrying the static bearer
// is refused (redirect_refused) and the redirect target receives nothing. Twin: without a bearer
// the same redirect is followed, so the target is really reachable.
func TestBearerNeverFollowsRedirect(t *testing.T) {
	var mu sync.Mutex
	var targetSaw []string
	h := mcptest.HTTPHandler(mcptest.NewServer("target", mcptest.DefaultTools()), mcptest.Modern)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targetSaw = append(targetSaw, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	seen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(targetSaw)
	}

	file := writeFile(t, t.TempDir(), "token", testBearer)
	code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", redirector.URL+"/mcp", "--bearer-file", file)
	if code != exitRefused || !strings.HasPrefix(errOut, "refused: "+RefusalBearerRedirect+"\n") {
		t.Fatalf("redirect with a bearer: exit %d: %s", code, errOut)
	}
	if seen() != 0 {
		t.Fatalf("the redirect target received %d request(s)", seen())
	}
	if code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", redirector.URL+"/mcp"); code != exitOK || seen() == 0 {
		t.Fatalf("twin without bearer: exit %d, target saw %d: %s", code, seen(), errOut)
	}
}

// TestBearerFileReplacesOAuthStore: with --bearer-file the OAuth store is not used for the
// request: the stored credential is not presented, not refreshed, not rewritten. Twin: without
// --bearer-file the stored credential is presented and works.
func TestBearerFileReplacesOAuthStore(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	env, stdout, stderr, dir := oauthEnv(t)
	playBrowser(t)
	ctx := context.Background()
	if code := run(ctx, env, []string{"login", "--url", rs.URL, "--timeout", "30s"}); code != exitOK {
		t.Fatalf("login: exit %d: %s", code, stderr)
	}
	cred, err := oauth.NewXDGStore(dir).Load(ctx, oauth.Key{Resource: rs.URL, Issuer: as.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	files := storedFiles(t, dir)
	storedBefore, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	countsBefore, presentedBefore := as.Counts(), len(rs.Presented())

	// A static bearer the server does not accept: refused, and the stored token never sent.
	stdout.Reset()
	stderr.Reset()
	bad := writeFile(t, t.TempDir(), "bad", "not-the-stored-token\n")
	if code := run(ctx, env, []string{"snapshot", "--url", rs.URL, "--bearer-file", bad}); code != exitRefused ||
		!strings.HasPrefix(stderr.String(), "refused: bearer_rejected\n") {
		t.Fatalf("bad static bearer: exit %d: %s", code, stderr)
	}
	for _, tok := range rs.Presented()[presentedBefore:] {
		if tok != "not-the-stored-token" {
			t.Fatalf("the server received another token than the static bearer")
		}
	}
	if len(rs.Presented()) == presentedBefore {
		t.Fatal("the static bearer was not presented")
	}
	if as.Counts() != countsBefore {
		t.Fatalf("the authorization server was used: %+v -> %+v", countsBefore, as.Counts())
	}
	if after, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(after, storedBefore) {
		t.Fatalf("the stored credential changed (%v)", err)
	}
	if strings.Contains(stdout.String()+stderr.String(), cred.AccessToken) {
		t.Fatal("a token was printed")
	}

	// A static bearer that is valid works on its own (here: the same access token, from a file).
	stderr.Reset()
	good := writeFile(t, t.TempDir(), "good", cred.AccessToken+"\n")
	if code := run(ctx, env, []string{"call", "--url", rs.URL, "--bearer-file", good, "--tool", "echo", "--args", `{"text":"hi"}`}); code != exitOK {
		t.Fatalf("valid static bearer: exit %d: %s", code, stderr)
	}

	// Twin: without --bearer-file the store is used.
	stdout.Reset()
	stderr.Reset()
	if code := run(ctx, env, []string{"snapshot", "--url", rs.URL}); code != exitOK {
		t.Fatalf("stored credential: exit %d: %s", code, stderr)
	}
	var snap struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &snap); err != nil || len(snap.Tools) != 2 {
		t.Fatalf("snapshot with stored credential: %.200s", stdout)
	}
}
