package netcause

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Real exchanges on loopback end in the class that explains them; a wrapped error keeps it, and
// an error that is no network failure has none.
func TestOfRealFailures(t *testing.T) {
	get := func(c *http.Client, url string) error {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	// Refused: a port nothing listens on (bound, then closed).
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	err = get(http.DefaultClient, "http://"+closed+"/")
	if got := Of(err); got != Refused {
		t.Errorf("closed port: %q (%v)", got, err)
	}

	// Timeout: a listener that accepts and never answers.
	silent, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	err = get(&http.Client{Timeout: 100 * time.Millisecond}, "http://"+silent.Addr().String()+"/")
	if got := Of(err); got != Timeout {
		t.Errorf("silent server: %q (%v)", got, err)
	}

	// TLS: an untrusted certificate, and TLS spoken to a plain HTTP server.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	err = get(http.DefaultClient, ts.URL)
	if got := Of(err); got != TLS {
		t.Errorf("untrusted certificate: %q (%v)", got, err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	// tls.Dial: net/http answers this case with its own plain error instead.
	_, err = (&tls.Dialer{Config: &tls.Config{ServerName: "127.0.0.1"}}).DialContext(t.Context(), "tcp", plain.Listener.Addr().String())
	if got := Of(err); got != TLS {
		t.Errorf("TLS to plain HTTP: %q (%v)", got, err)
	}

	// Reset: the server closes with unread data, which resets the connection.
	reset, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer reset.Close()
	go func() {
		c, err := reset.Accept()
		if err != nil {
			return
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}()
	c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", reset.Addr().String())
	if err == nil { // the reset may already come with the dial
		time.Sleep(50 * time.Millisecond)
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if got := Of(err); got != Reset {
		t.Errorf("reset: %q (%v)", got, err)
	}

	if got := Of(context.DeadlineExceeded); got != Timeout {
		t.Errorf("deadline: %q", got)
	}
	if got := Of(fmt.Errorf("wrapped: %w", &net.DNSError{Err: "no such host", Name: "h.invalid", IsNotFound: true})); got != DNS {
		t.Errorf("DNS error (built, no lookup leaves this machine): %q", got)
	}
	if got := Of(errors.New("HTTP 500")); got != "" {
		t.Errorf("no network failure: %q", got)
	}
}
