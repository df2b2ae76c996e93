package oauth

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// callbackPath is the path of the loopback redirect URI.
const callbackPath = "/callback"

// LoopbackRedirect is the native-app redirect receiver of RFC 8252 §7.3: an HTTP listener on
// 127.0.0.1 with a random port that accepts exactly one authorization response whose state
// matches the pending request.
type LoopbackRedirect struct {
	ln  net.Listener
	srv *http.Server
	url string

	mu      sync.Mutex
	state   string
	results chan url.Values
}

// ListenLoopback starts a redirect receiver on 127.0.0.1 with a port chosen by the system.
func ListenLoopback(ctx context.Context) (*LoopbackRedirect, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &LoopbackRedirect{ln: ln, url: "http://" + ln.Addr().String() + callbackPath, results: make(chan url.Values, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+callbackPath, l.callback)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// URL returns the redirect URI ("http://127.0.0.1:PORT/callback").
func (l *LoopbackRedirect) URL() string { return l.url }

// Close stops the listener.
func (l *LoopbackRedirect) Close() error { return l.srv.Close() }

func (l *LoopbackRedirect) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l.mu.Lock()
	want := l.state
	l.mu.Unlock()
	if want == "" || q.Get("state") != want {
		http.Error(w, "no authorization is pending for this request", http.StatusBadRequest)
		return
	}
	select {
	case l.results <- q:
	default: // a response was already delivered
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if q.Get("error") != "" {
		fmt.Fprintln(w, "Authorization was not granted. You can close this window.")
		return
	}
	fmt.Fprintln(w, "Authorization received. You can close this window and return to the terminal.")
}

// Fetcher returns an [auth.AuthorizationCodeFetcher] that hands the authorization URL to open
// (which prints it, and may start a browser), prints one progress line to progress, and waits
// until the redirect arrives, ctx ends, or timeout passes ([ErrAuthorizationTimeout]). A denial
// becomes a [*DeniedError]; another error response an [*AuthorizationError] carrying only its
// registered error code.
func (l *LoopbackRedirect) Fetcher(open func(authURL string) error, progress io.Writer, timeout time.Duration) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil || u.Query().Get("state") == "" {
			return nil, &AuthorizationError{Stage: "authorization"}
		}
		l.mu.Lock()
		l.state = u.Query().Get("state")
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			l.state = ""
			l.mu.Unlock()
		}()
		if err := open(args.URL); err != nil {
			return nil, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "Waiting up to %s for the authorization to complete in the browser...\n", timeout)
		}
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case q := <-l.results:
			if e := q.Get("error"); e == "access_denied" {
				return nil, &DeniedError{}
			} else if e != "" {
				return nil, &AuthorizationError{Stage: "authorization", Code: sanitizeCode(e)}
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		case <-timer.C:
			return nil, &AuthorizationError{Stage: "authorization", err: ErrAuthorizationTimeout}
		case <-ctx.Done():
			return nil, &AuthorizationError{Stage: "authorization", err: ctx.Err()}
		}
	}
}
