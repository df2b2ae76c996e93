package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/oauth2"

	"github.com/b10x/connector-mcp/egress"
)

// MaxBearerFileBytes bounds a --bearer-file (a ServiceAccount token or a JWT is a few KiB).
const MaxBearerFileBytes = 16 << 10

// Refusal names of --bearer-file and of the static bearer it supplies (exit 3).
const (
	// RefusalBearerFileMissing: the file does not exist, cannot be read or is not a file.
	RefusalBearerFileMissing = "bearer_file_missing"
	// RefusalBearerFileEmpty: the file holds nothing but line endings.
	RefusalBearerFileEmpty = "bearer_file_empty" //nolint:gosec // G101: a refusal name, not a credential
	// RefusalBearerFileTooLarge: the file is larger than MaxBearerFileBytes.
	RefusalBearerFileTooLarge = "bearer_file_too_large"
	// RefusalBearerFileInvalid: the token is not an RFC 6750 b64token (spaces, control
	// characters or other bytes that could not travel in an Authorization header).
	RefusalBearerFileInvalid = "bearer_file_invalid"
	// RefusalBearerRejected: the server answered 401 or 403 to the static bearer.
	RefusalBearerRejected = "bearer_rejected"
	// RefusalBearerRedirect: the server redirected a request that carries the static bearer.
	RefusalBearerRedirect = "redirect_refused"
)

// Sentinels of the --bearer-file refusals, matched with errors.Is.
var (
	// ErrBearerFile reports an unusable --bearer-file (missing, empty, too large or invalid).
	ErrBearerFile = errors.New("bearer file unusable")
	// ErrBearerRejected reports that the server refused the static bearer.
	ErrBearerRejected = errors.New("bearer token rejected by the server")
	// ErrBearerRedirect reports a redirect of a request carrying the static bearer.
	ErrBearerRedirect = errors.New("redirect refused: the static bearer never follows a redirect")
)

// BearerFileError is a named refusal of --bearer-file. It names the file, never its content.
type BearerFileError struct {
	// Name is the refusal name (RefusalBearerFile...).
	Name string
	// Path is the file as given on the command line.
	Path string
}

// Error implements error; it never carries the token.
func (e *BearerFileError) Error() string {
	return fmt.Sprintf("--bearer-file %s: %s", e.Path, strings.ReplaceAll(strings.TrimPrefix(e.Name, "bearer_file_"), "_", " "))
}

// Refusal returns the refusal name.
func (e *BearerFileError) Refusal() string { return e.Name }

// Unwrap returns ErrBearerFile.
func (e *BearerFileError) Unwrap() error { return ErrBearerFile }

// BearerRejectedError reports the server's 401 or 403 to the static bearer (refusal
// "bearer_rejected"). It carries the status only: no header, body or server prose.
type BearerRejectedError struct {
	// Status is the HTTP status code.
	Status int
}

// Error implements error; it never carries the token.
func (e *BearerRejectedError) Error() string {
	return fmt.Sprintf("the server answered HTTP %d to the bearer of --bearer-file", e.Status)
}

// Refusal returns "bearer_rejected".
func (e *BearerRejectedError) Refusal() string { return RefusalBearerRejected }

// Unwrap returns ErrBearerRejected.
func (e *BearerRejectedError) Unwrap() error { return ErrBearerRejected }

// BearerRedirectError reports a redirect of a request that carries the static bearer (refusal
// "redirect_refused"). The redirect target is not named.
type BearerRedirectError struct{}

// Error implements error; it never carries the token.
func (e *BearerRedirectError) Error() string { return ErrBearerRedirect.Error() }

// Refusal returns "redirect_refused".
func (e *BearerRedirectError) Refusal() string { return RefusalBearerRedirect }

// Unwrap returns ErrBearerRedirect.
func (e *BearerRedirectError) Unwrap() error { return ErrBearerRedirect }

// readBearerFile reads a static bearer token: at most MaxBearerFileBytes, trailing line endings
// trimmed, and the rest an RFC 6750 b64token. The token is never printed.
func readBearerFile(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the path is the user's own command-line argument
	if err != nil {
		// Missing or unreadable (permissions): the same refusal; the OS error is not shown.
		return "", &BearerFileError{Name: RefusalBearerFileMissing, Path: path}
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() && fi.Mode()&fs.ModeNamedPipe == 0 {
		// A directory or device is not a token file; a named pipe (e.g. <(cat token)) is.
		return "", &BearerFileError{Name: RefusalBearerFileMissing, Path: path}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxBearerFileBytes+1))
	if err != nil {
		return "", &BearerFileError{Name: RefusalBearerFileMissing, Path: path}
	}
	if len(b) > MaxBearerFileBytes {
		return "", &BearerFileError{Name: RefusalBearerFileTooLarge, Path: path}
	}
	token := strings.TrimRight(string(b), "\r\n")
	if token == "" {
		return "", &BearerFileError{Name: RefusalBearerFileEmpty, Path: path}
	}
	if !isB64Token(token) {
		return "", &BearerFileError{Name: RefusalBearerFileInvalid, Path: path}
	}
	return token, nil
}

// isB64Token reports whether s matches RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}

// staticBearer presents the token of --bearer-file on every request to the MCP server, through
// the SDK's authorization hook. It never starts an authorization flow: a 401 or 403 answer is
// the "bearer_rejected" refusal.
type staticBearer struct{ token string }

// TokenSource implements auth.OAuthHandler.
func (b *staticBearer) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: b.token, TokenType: "Bearer"}), nil
}

// Authorize implements auth.OAuthHandler: the static bearer was refused.
func (b *staticBearer) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	status := 0
	if resp != nil {
		status = resp.StatusCode
		if resp.Body != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
	}
	return &BearerRejectedError{Status: status}
}

// bearerHTTPClient is the HTTP client for a server reached with a static bearer in the default
// egress mode: no proxy from the environment (like mcpclient's default client) and no redirect
// followed at all, so the bearer goes to the named server and nowhere else. (In hosted mode the
// egress exchange port is bound to the server's origin and follows no redirect either.)
func bearerHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return &BearerRedirectError{} },
	}
}

// parseServerURL parses --url. A URL with a scheme other than http or https (file:, ftp:, ...)
// is refused by name ("scheme_refused", exit 3); one without a scheme or host is a usage error.
// http to a host other than loopback is refused later by mcpclient ("insecure_transport").
func parseServerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usagef("--url: not an absolute URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, usagef("--url: not an absolute URL")
	default:
		return nil, &egress.SchemeError{Scheme: strings.ToLower(u.Scheme), Reason: "MCP servers are reached over https, or http to loopback"}
	}
	if u.Host == "" {
		return nil, usagef("--url: not an absolute URL")
	}
	return u, nil
}
