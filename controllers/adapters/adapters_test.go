package adapters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/egress/k8sbinding"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

func TestClassifyFreezeErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		reason    string
		transient bool
	}{
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), v1.ReasonServerUnreachable, true},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), v1.ReasonServerUnreachable, true},
		{"probe timeout", &mcpclient.RefusalError{Name: "probe_timeout", Err: mcpclient.ErrProbeTimeout}, v1.ReasonServerUnreachable, true},
		{"http status", fmt.Errorf("%w: 503", mcpclient.ErrHTTPStatus), v1.ReasonServerUnreachable, true},
		{"unresolvable host", &egress.DestinationError{Addr: "mcp.example:443", Reason: "resolve"}, v1.ReasonServerUnreachable, true},
		{"credential missing", &egress.CredentialError{Ref: egress.CredentialRef{Name: "s", Key: "k"}, Reason: "secret not found"}, v1.ReasonCredentialNotFound, true},
		// A destination refused at dial time reads like a closed port (no scanner oracle).
		{"metadata address at dial time", fmt.Errorf("post: %w", &egress.DestinationError{Addr: "169.254.169.254:80", Reason: "metadata"}), v1.ReasonServerUnreachable, true},
		{"credential not opted in", &k8sbinding.CredentialRefusal{Name: k8sbinding.RefusalCredentialNotOptedIn}, v1.ReasonCredentialNotFound, true},
		{"credential for another host", fmt.Errorf("x: %w", &k8sbinding.CredentialRefusal{Name: k8sbinding.RefusalCredentialHostNotAllowed}), v1.ReasonCredentialRefused, false},
		{"too many tools", &mcpclient.RefusalError{Name: "too_many_tools", Err: mcpclient.ErrTooManyTools}, v1.ReasonFreezeRefused, false},
		{"roots requested", &mcpclient.FeatureRefusedError{Feature: "roots"}, v1.ReasonFreezeRefused, false},
		// A certificate that does not verify needs a human (a CA bundle, or an impostor).
		{"private CA without its bundle", fmt.Errorf("connect: %w", &egress.TLSError{Name: egress.RefusalTLSUnknownAuthority}), v1.ReasonFreezeRefused, false},
		{"certificate for another host", &egress.TLSError{Name: egress.RefusalTLSHostnameMismatch}, v1.ReasonFreezeRefused, false},
		// Step-up needs a human: the credential lacks a scope.
		{"insufficient scope", &mcpclient.TransportError{Op: "connect", Status: 403, Err: mcpclient.ErrInsufficientScope, Scopes: []string{"repo:write"}}, v1.ReasonFreezeRefused, false},
		{"plain 403", &mcpclient.TransportError{Op: "connect", Status: 403, Err: mcpclient.ErrHTTPStatus}, v1.ReasonServerUnreachable, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var serr *controllers.StageError
			if !errors.As(classify(tc.err, "https://mcp.example.com/mcp"), &serr) {
				t.Fatal("not a StageError")
			}
			if serr.Reason != tc.reason || serr.Transient != tc.transient || serr.Condition != v1.ConditionSnapshotFrozen {
				t.Fatalf("got %s transient=%v", serr.Reason, serr.Transient)
			}
			if strings.Contains(serr.Message, "127.0.0.1:1") || strings.Contains(serr.Message, "connection refused") {
				t.Fatalf("message carries a raw transport error: %q", serr.Message)
			}
			if tc.name == "insufficient scope" && !strings.Contains(serr.Message, "requires scope repo:write") {
				t.Fatalf("the step-up message does not name the scope: %q", serr.Message)
			}
		})
	}
}

func TestClassifyPackErrors(t *testing.T) {
	cases := []struct {
		err       error
		reason    string
		transient bool
	}{
		{&ocipack.RefusalError{Name: "missing_signature", Err: ocipack.ErrNoSignature}, v1.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "missing_attestation", Err: ocipack.ErrNoAttestation}, v1.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}, v1.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "wrong_identity", Err: ocipack.ErrWrongIdentity}, v1.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "blob_digest_mismatch", Err: ocipack.ErrBlobDigestMismatch}, v1.ReasonPackInvalid, false},
		{&ocipack.RefusalError{Name: "unreviewed", Path: "operations[0].effect", Err: ocipack.ErrUnreviewedEffect}, v1.ReasonPackInvalid, false},
		{&ocipack.RegistryError{Op: "fetch", Err: errors.New("boom")}, v1.ReasonRegistryUnavailable, true},
		{errors.New("something else"), v1.ReasonRegistryUnavailable, true},
	}
	for _, tc := range cases {
		var serr *controllers.StageError
		if !errors.As(classifyPack(tc.err), &serr) || serr.Reason != tc.reason || serr.Transient != tc.transient || serr.Condition != v1.ConditionSourceVerified {
			t.Errorf("%v: got %+v, want %s", tc.err, serr, tc.reason)
		}
	}
	// A registry behind a CA the manager does not trust: retried, and the TLS refusal is named
	// (twin: a plain registry failure names none).
	var serr *controllers.StageError
	tlsErr := &ocipack.RegistryError{Op: "fetch", Err: fmt.Errorf("get: %w", &egress.TLSError{Name: egress.RefusalTLSUnknownAuthority})}
	if !errors.As(classifyPack(tlsErr), &serr) || !strings.Contains(serr.Message, egress.RefusalTLSUnknownAuthority) {
		t.Errorf("registry TLS refusal: %+v", serr)
	}
	if !errors.As(classifyPack(&ocipack.RegistryError{Op: "fetch", Err: errors.New("boom")}), &serr) || strings.Contains(serr.Message, "tls_") {
		t.Errorf("plain registry failure: %+v", serr)
	}
}

// No port-scanner oracle: a freeze of an endpoint whose name resolves into a denied range and a
// freeze of a closed port end in the same reason and the same message (but for the URL the
// tenant wrote itself); neither carries the policy's word for the address. Twin: an open port
// is frozen.
func TestFreezeRefusalsAreNoOracle(t *testing.T) {
	lc := &net.ListenConfig{}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // closed from now on
	srv := mcptest.StartHTTP(mcptest.NewServer("demo", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	srvPort := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	open := egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}
	denied := egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe, DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	freeze := func(ip egress.IPPolicy, url string) error {
		f := &Freezer{Client: mcpclient.NewClient(nil), Binder: &k8sbinding.Binder{Base: egress.Policy{IP: ip, Timeout: 5 * time.Second}},
			Limits: mcpclient.Limits{ProbeTimeout: 3 * time.Second, CallTimeout: 5 * time.Second}}
		_, err := f.Freeze(context.Background(), controllers.FreezeRequest{Namespace: "ns", Name: "sd", URL: url})
		return err
	}
	if err := freeze(open, srv.URL+"/mcp"); err != nil {
		t.Fatalf("twin: the open server: %v", err)
	}
	closedURL := fmt.Sprintf("http://localhost:%d/mcp", port)
	deniedURL := "http://localhost:" + srvPort + "/mcp" // a live server, behind the deny list
	var closed, deny *controllers.StageError
	if !errors.As(freeze(open, closedURL), &closed) || !errors.As(freeze(denied, deniedURL), &deny) {
		t.Fatal("not stage errors")
	}
	norm := func(s *controllers.StageError, url string) string {
		return fmt.Sprintf("%s %v %s", s.Reason, s.Transient, strings.ReplaceAll(s.Message, controllers.SanitizeURL(url), "URL"))
	}
	if a, b := norm(closed, closedURL), norm(deny, deniedURL); a != b {
		t.Fatalf("closed port: %q; denied address: %q", a, b)
	}
	for _, word := range []string{"loopback", "apiserver", "metadata", "private", "destination"} {
		if strings.Contains(deny.Message, word) {
			t.Fatalf("the message says %q: %q", word, deny.Message)
		}
	}
}
