package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/refusal"
)

// Response is one bounded response: status, headers and the complete (decompressed) body.
type Response struct {
	// StatusCode is the HTTP status code.
	StatusCode int
	// Header holds the response headers (Content-Encoding removed when the body was
	// decompressed).
	Header http.Header
	// Body is the complete body, at most the policy's MaxResponseBytes.
	Body []byte
}

// Transport is the exchange port built from one [Policy]: [Transport.Exchange] sends one request
// and returns one bounded, fully read response. It also implements [http.RoundTripper] and is
// safe for concurrent use. Connections are dialed only through the guarded [Dialer]; the proxy
// environment is ignored.
type Transport struct {
	p      Policy
	bind   *binding
	dialer *Dialer
	ht     *http.Transport
	client *http.Client
	// plainBound: the port is bound to a plain-http endpoint, so its dialer accepts only a
	// loopback peer for every connection (no per-request marker needed).
	plainBound bool
}

// NewTransport returns the exchange port for p, or an error wrapping [ErrInvalidPolicy] (or a
// [*SchemeError] when the endpoint's scheme is refused).
func NewTransport(p Policy) (*Transport, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	bind, err := p.endpointBinding()
	if err != nil {
		return nil, err
	}
	if bind != nil && len(p.IP.Ports) == 0 {
		// The dial-time check enforces the bound port too.
		port, err := strconv.ParseUint(bind.port, 10, 16)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("%w: endpoint port", ErrInvalidPolicy)
		}
		p.IP.Ports = []uint16{uint16(port)}
	}
	t := &Transport{p: p, bind: bind}
	t.dialer = &Dialer{Policy: p.IP, Deny: p.Deny, Resolver: p.Resolver, Timeout: p.Timeout}
	if bind != nil && bind.scheme == "http" {
		// Every request of a port bound to a plain-http endpoint is plain http (checkURL refuses
		// any other scheme, redirects included): judge every dial as one, once for all.
		t.plainBound = true
		t.dialer.Policy.plainHTTP = true
	}
	var tlsCfg *tls.Config
	if p.TLSClientConfig != nil {
		tlsCfg = p.TLSClientConfig.Clone()
	} else {
		tlsCfg = &tls.Config{}
	}
	if tlsCfg.MinVersion < tls.VersionTLS12 {
		tlsCfg.MinVersion = tls.VersionTLS12
	}
	// HTTP/1.1 only: an exchange needs no multiplexing, and every bound (notably the response
	// header bound, which HTTP/2 reports only as a connection PROTOCOL_ERROR) stays exact.
	tlsCfg.NextProtos = []string{"http/1.1"}
	t.ht = &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            t.dialer.DialContext,
		TLSClientConfig:        tlsCfg,
		TLSHandshakeTimeout:    p.Timeout,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxResponseHeaderBytes: p.MaxHeaderBytes,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
	}
	t.client = &http.Client{Transport: t.ht, CheckRedirect: t.checkRedirect}
	return t, nil
}

// CloseIdleConnections closes idle pooled connections.
func (t *Transport) CloseIdleConnections() { t.ht.CloseIdleConnections() }

// Exchange sends req (its context is combined with the policy deadline) and returns the
// complete response, or a named refusal.
func (t *Transport) Exchange(ctx context.Context, req *http.Request) (*Response, error) {
	r, err := t.exchange(ctx, req)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// exchange is [Transport.Exchange], returning the response by value.
func (t *Transport) exchange(ctx context.Context, req *http.Request) (Response, error) {
	resp, cancel, err := t.send(ctx, req, true)
	if err != nil {
		return Response{}, err
	}
	defer cancel()
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// Only gzip is asked for, and net/http decodes it (removing the header). Anything else
		// would reach the caller undecoded, outside the bound.
		return Response{}, &ExchangeError{Op: req.Method, Err: ErrUnrequestedEncoding}
	}
	body, err := readBounded(resp.Body, resp.ContentLength, t.p.MaxResponseBytes)
	if err != nil {
		return Response{}, t.mapErr(resp.Request.Context(), err)
	}
	if int64(len(body)) > t.p.MaxResponseBytes {
		return Response{}, &TooLargeError{Kind: LimitResponse, Limit: t.p.MaxResponseBytes}
	}
	return Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// RoundTrip implements [http.RoundTripper] over [Transport.Exchange] (the adapter handed to
// go-sdk's StreamableClientTransport). A GET asking for text/event-stream — the optional
// server-push stream — is declined locally with 405 Method Not Allowed, which go-sdk treats as
// "the server offers no stream"; nothing is sent. The body of the returned response is the
// complete bounded body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if resp := declineStream(req); resp != nil {
		return resp, nil
	}
	r, err := t.exchange(req.Context(), req)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status:        statusLine(r.StatusCode),
		StatusCode:    r.StatusCode,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        r.Header,
		Body:          newBytesBody(r.Body),
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}, nil
}

// statusLine is the status of a response handed out: the code and its standard text, never the
// server's reason phrase.
func statusLine(code int) string {
	switch code {
	case http.StatusOK:
		return "200 OK"
	case http.StatusAccepted:
		return "202 Accepted"
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// bytesBody is a complete in-memory body: io.NopCloser(bytes.NewReader(b)) in one allocation.
type bytesBody struct{ bytes.Reader }

func newBytesBody(b []byte) *bytesBody {
	r := &bytesBody{}
	r.Reset(b)
	return r
}

// Close implements io.Closer; there is nothing to release.
func (*bytesBody) Close() error { return nil }

// declineStream answers a GET asking for text/event-stream (a server-push stream, which an
// exchange port does not carry) with a local 405 Method Not Allowed; nil for any other request.
func declineStream(req *http.Request) *http.Response {
	if req.Method != http.MethodGet || !strings.Contains(strings.ToLower(req.Header.Get("Accept")), "text/event-stream") {
		return nil
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		Status:        "405 Method Not Allowed",
		StatusCode:    http.StatusMethodNotAllowed,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Allow": {"POST, DELETE"}, "Content-Type": {"text/plain; charset=utf-8"}},
		Body:          http.NoBody,
		ContentLength: 0,
		Request:       req,
	}
}

// HTTPClient returns an [http.Client] whose every request goes through the port (see
// [Transport.RoundTrip]); hand it to go-sdk's mcp.StreamableClientTransport.HTTPClient.
// Redirects are handled by the port's policy, never by the returned client.
func (t *Transport) HTTPClient() *http.Client {
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// send checks req against the policy, assembles the outgoing request (bounded body, bearer,
// header bound, deadline) and sends it. On success the caller must close the body and call
// cancel. bufferBody reads the request body into memory (exchange); otherwise it is streamed
// through a bound.
func (t *Transport) send(ctx context.Context, req *http.Request, bufferBody bool) (*http.Response, context.CancelFunc, error) {
	closeReqBody := func() {
		if req.Body != nil {
			req.Body.Close()
		}
	}
	if req.URL == nil {
		closeReqBody()
		return nil, nil, &DestinationError{Addr: "", Reason: "invalid"}
	}
	if err := t.checkURL(req.URL); err != nil {
		closeReqBody()
		return nil, nil, err
	}
	if req.ContentLength > t.p.MaxRequestBytes {
		closeReqBody()
		return nil, nil, &TooLargeError{Kind: LimitRequest, Limit: t.p.MaxRequestBytes}
	}
	var body []byte
	if bufferBody && req.Body != nil && req.Body != http.NoBody {
		b, err := readBounded(req.Body, req.ContentLength, t.p.MaxRequestBytes)
		closeReqBody()
		if err != nil {
			return nil, nil, err
		}
		if int64(len(b)) > t.p.MaxRequestBytes {
			return nil, nil, &TooLargeError{Kind: LimitRequest, Limit: t.p.MaxRequestBytes}
		}
		body = b
	}

	ctx, cancel := context.WithTimeout(ctx, t.p.Timeout)
	if !t.plainBound && strings.EqualFold(req.URL.Scheme, "http") {
		ctx = withPlainHTTP(ctx)
	}
	// A shallow copy; its headers are the caller's until something below changes them, then
	// its own (ownHeader); the URL is shared, as nothing on the way out writes to it.
	out := req.WithContext(ctx)
	owned := false
	ownHeader := func() {
		if !owned {
			out.Header, owned = req.Header.Clone(), true
			if out.Header == nil {
				out.Header = http.Header{}
			}
		}
	}
	out.RequestURI = ""
	out.Host = "" // the Host header is the bound URL's host, never a caller override
	if bufferBody {
		if body == nil {
			out.Body, out.ContentLength, out.GetBody = nil, 0, nil
		} else {
			out.ContentLength = int64(len(body))
			// io.NopCloser over a *bytes.Reader: net/http recognises it as an in-memory body and
			// writes headers and body in one flush.
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	} else if req.Body != nil && req.Body != http.NoBody {
		out.Body = &boundedReader{rc: req.Body, limit: t.p.MaxRequestBytes, kind: LimitRequest}
		out.GetBody = nil
	}
	// Let the transport negotiate and decode compression itself, so the response bound
	// applies to decompressed bytes.
	for _, h := range [...]string{"Accept-Encoding", "Proxy-Authorization"} {
		if _, ok := out.Header[h]; ok {
			ownHeader()
			out.Header.Del(h)
		}
	}
	fail := func(err error) (*http.Response, context.CancelFunc, error) {
		cancel()
		if !bufferBody {
			closeReqBody()
		}
		return nil, nil, err
	}
	if t.p.Credential != nil {
		ownHeader()
		if err := t.setBearer(ctx, out); err != nil {
			return fail(err)
		}
	}
	if headerBytes(out) > t.p.MaxHeaderBytes {
		return fail(&TooLargeError{Kind: LimitHeader, Limit: t.p.MaxHeaderBytes})
	}
	// The assembled request (and its bearer) is referenced by nothing once Do returns: the
	// response handed out carries the caller's request, not this one.
	resp, err := t.do(out)
	if err != nil {
		err = t.mapErr(ctx, err)
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// do sends out. With redirects disabled (the MCP exchange case) it goes straight to the
// pooled transport, sparing an http.Client layer per exchange, and refuses a redirect exactly as
// the client's redirect policy would; otherwise the client follows redirects under
// checkRedirect.
func (t *Transport) do(out *http.Request) (*http.Response, error) {
	if t.p.MaxRedirects > 0 {
		return t.client.Do(out)
	}
	if out.Header == nil {
		out.Header = http.Header{}
	}
	resp, err := t.ht.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if isFollowedRedirect(out, resp) {
		resp.Body.Close()
		return nil, &RedirectError{Reason: "redirects disabled"}
	}
	return resp, nil
}

// isFollowedRedirect reports whether net/http's client would follow resp (see
// net/http.redirectBehavior): 301, 302 and 303 with a Location; 307 and 308 with a Location when
// the request body can be replayed or is empty.
func isFollowedRedirect(req *http.Request, resp *http.Response) bool {
	if resp.Header.Get("Location") == "" {
		return false
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		return true
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return req.GetBody != nil || req.Body == nil || req.Body == http.NoBody
	}
	return false
}

// setBearer fetches the credential for this exchange and sets it on out only.
func (t *Transport) setBearer(ctx context.Context, out *http.Request) error {
	tok, err := t.p.Secrets.Get(ctx, *t.p.Credential)
	if err != nil {
		return err
	}
	defer clear(tok)
	v := bytes.TrimSpace(tok)
	if len(v) == 0 {
		return &CredentialError{Ref: *t.p.Credential, Reason: "empty"}
	}
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			return &CredentialError{Ref: *t.p.Credential, Reason: "not a bearer token"}
		}
	}
	out.Header.Set("Authorization", "Bearer "+string(v))
	return nil
}

// checkURL applies the scheme rule and the endpoint binding to u.
func (t *Transport) checkURL(u *url.URL) error {
	if err := t.p.checkScheme(u.Scheme); err != nil {
		return err
	}
	b := bindingOf(u)
	if u.User != nil || b.host == "" {
		return &DestinationError{Addr: b.String(), Reason: "invalid"}
	}
	if t.bind != nil && b != *t.bind {
		if b.host == t.bind.host && b.port == t.bind.port {
			return &SchemeError{Scheme: u.Scheme, Reason: "scheme differs from the bound endpoint"}
		}
		return &DestinationError{Addr: b.String(), Reason: "binding"}
	}
	return nil
}

// checkRedirect is the policy for each redirect hop; the dial of the next hop is judged by
// the guarded dialer again.
func (t *Transport) checkRedirect(req *http.Request, via []*http.Request) error {
	if t.p.MaxRedirects == 0 {
		return &RedirectError{Reason: "redirects disabled"}
	}
	if len(via) > t.p.MaxRedirects {
		return &RedirectError{Reason: "too many redirects"}
	}
	prev := via[len(via)-1].URL
	if strings.EqualFold(prev.Scheme, "https") && !strings.EqualFold(req.URL.Scheme, "https") {
		return &RedirectError{Reason: "https to http"}
	}
	if err := t.checkURL(req.URL); err != nil {
		return &RedirectError{Reason: "target refused: " + refusalName(err)}
	}
	if bindingOf(req.URL) != bindingOf(via[0].URL) {
		// Never carry credentials to another host (net/http would keep them for subdomains).
		req.Header.Del("Authorization")
		req.Header.Del("Cookie")
	}
	return nil
}

// refusalName returns the stable name of a refusal error, or "refused".
func refusalName(err error) string {
	if name := refusal.Name(err); name != "" {
		return name
	}
	return "refused"
}

// mapErr turns a net/http error into a named refusal where one applies and strips the
// *url.Error wrapper (its text carries the full URL, query included).
func (t *Transport) mapErr(ctx context.Context, err error) error {
	var (
		de *DestinationError
		se *SchemeError
		re *RedirectError
		te *TooLargeError
		ce *CredentialError
		dl *DeadlineError
	)
	switch {
	case errors.As(err, &de):
		return de
	case errors.As(err, &se):
		return se
	case errors.As(err, &re):
		return re
	case errors.As(err, &te):
		return te
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &dl):
		return dl
	}
	if te := tlsRefusal(err); te != nil {
		return te
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return &DeadlineError{Timeout: t.p.Timeout}
	}
	// net/http reports the response header bound only as text.
	if strings.Contains(err.Error(), "server response headers exceeded") {
		return &TooLargeError{Kind: LimitHeader, Limit: t.p.MaxHeaderBytes}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &ExchangeError{Op: ue.Op, Err: ue.Err}
	}
	return &ExchangeError{Err: err}
}

// ExchangeError is a failure of an exchange that is not a named refusal (connection refused,
// TLS failure, ...). Its text never contains the URL's path or query.
type ExchangeError struct {
	// Op is the HTTP method, when known.
	Op string
	// Err is the underlying network or TLS error.
	Err error
}

func (e *ExchangeError) Error() string {
	if e.Op != "" {
		return "egress: " + e.Op + " exchange failed: " + e.Err.Error()
	}
	return "egress: exchange failed: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ExchangeError) Unwrap() error { return e.Err }

// readBounded reads r to its end, at most limit+1 bytes (so the caller can tell an overflow),
// into a buffer sized from the declared length when it is known and within the limit.
func readBounded(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared < 0 || declared > limit {
		return io.ReadAll(io.LimitReader(r, limit+1))
	}
	lr := io.LimitReader(r, limit+1)
	buf := make([]byte, 0, declared+1) // +1: EOF is seen without growing
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// headerBytes approximates the wire size of the request line and headers.
func headerBytes(r *http.Request) int64 {
	n := int64(len(r.Method) + len(r.URL.RequestURI()) + len(r.Host) + len(r.URL.Host) + 16)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// boundedReader passes at most limit bytes and then fails with a [TooLargeError]; when ctx
// (optional) has expired a read error becomes a [DeadlineError].
type boundedReader struct {
	rc      io.ReadCloser
	limit   int64
	n       int64
	kind    string
	ctx     context.Context
	timeout time.Duration
	cancel  context.CancelFunc
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, &TooLargeError{Kind: b.kind, Limit: b.limit}
	}
	if rest := b.limit - b.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		return n - int(b.n-b.limit), &TooLargeError{Kind: b.kind, Limit: b.limit}
	}
	if err != nil && err != io.EOF && b.ctx != nil && errors.Is(b.ctx.Err(), context.DeadlineExceeded) {
		return n, &DeadlineError{Timeout: b.timeout}
	}
	return n, err
}

func (b *boundedReader) Close() error {
	err := b.rc.Close()
	if b.cancel != nil {
		b.cancel()
	}
	return err
}
