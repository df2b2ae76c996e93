package adapters

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

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
		_, err := f.Freeze(context.Background(), activation.FreezeRequest{Namespace: "ns", Name: "sd", URL: url})
		return err
	}
	if err := freeze(open, srv.URL+"/mcp"); err != nil {
		t.Fatalf("twin: the open server: %v", err)
	}
	closedURL := fmt.Sprintf("http://localhost:%d/mcp", port)
	deniedURL := "http://localhost:" + srvPort + "/mcp" // a live server, behind the deny list
	closed := activation.ClassifyFreezeError(activation.FreezeRequest{URL: closedURL}, freeze(open, closedURL))
	deny := activation.ClassifyFreezeError(activation.FreezeRequest{URL: deniedURL}, freeze(denied, deniedURL))
	if closed == nil || deny == nil {
		t.Fatal("not stage errors")
	}
	norm := func(s *activation.StageError, url string) string {
		return fmt.Sprintf("%s %v %s", s.Reason(), s.Transient(), strings.ReplaceAll(s.Message(), activation.SanitizeURL(url), "URL"))
	}
	if a, b := norm(closed, closedURL), norm(deny, deniedURL); a != b {
		t.Fatalf("closed port: %q; denied address: %q", a, b)
	}
	for _, word := range []string{"loopback", "apiserver", "metadata", "private", "destination"} {
		if strings.Contains(deny.Message(), word) {
			t.Fatalf("the message says %q: %q", word, deny.Message())
		}
	}
}
