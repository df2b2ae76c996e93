package gatewayapp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Serve serves the gateway on ln until ctx is done, then drains running calls (at most
// DrainTimeout) and stops. TLS is used unless PlainHTTPUnsafe; HTTP/2 is off. The server's
// timeouts are those of ServerTimeouts.
func (w *Wired) Serve(ctx context.Context, ln net.Listener) error {
	readHeader, read, write := w.opts.ServerTimeouts()
	srv := &http.Server{Handler: w.Gateway.Handler(), IdleTimeout: 120 * time.Second,
		ReadHeaderTimeout: readHeader, ReadTimeout: read, WriteTimeout: write,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	if !w.opts.PlainHTTPUnsafe {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		getCert, err := watchedCertificate(wctx, w.opts.TLSCertFile, w.opts.TLSKeyFile, 0)
		if err != nil {
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.Background(), w.opts.DrainTimeout)
	defer cancel()
	derr := w.Gateway.Drain(dctx)
	serr := srv.Shutdown(dctx)
	w.Registry.Close()
	return errors.Join(derr, serr)
}

// watchedCertificate loads the serving certificate and key and watches their files until ctx is
// done: a rotated certificate (a renewed Secret mount) is served to new connections without a
// restart. interval is the polling period beside file events (0: certwatcher's default).
func watchedCertificate(ctx context.Context, certFile, keyFile string, interval time.Duration) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: serving certificate: %w", err)
	}
	if interval > 0 {
		cw = cw.WithWatchInterval(interval)
	}
	go func() { _ = cw.Start(ctx) }()
	return cw.GetCertificate, nil
}

// readHeaderTimeout bounds the request line and headers; writeMargin is what WriteTimeout leaves
// above the body read and the call timeout (authentication, writing the answer).
const (
	readHeaderTimeout = 10 * time.Second
	writeMargin       = 30 * time.Second
)

// ServerTimeouts are the HTTP server's timeouts: the headers within 10s; the whole request
// (headers and body) within 10s plus --body-read-timeout (the gateway also sets a per-request
// read deadline of --body-read-timeout on the body, before any slot is taken); the answer
// written within --body-read-timeout plus --call-timeout plus 30s, so a call that runs to its
// deadline still gets its answer written while a reader that stalls does not hold the
// connection forever.
func (o *Options) ServerTimeouts() (readHeader, read, write time.Duration) {
	return readHeaderTimeout, readHeaderTimeout + o.BodyReadTimeout, o.BodyReadTimeout + o.CallTimeout + writeMargin
}
