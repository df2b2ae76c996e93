package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/refusal"
)

// The operator's (hosted) IP policy judged on a few addresses: the allow-list opens a private
// range, never loopback, metadata or the apiserver.
func ExampleIPPolicy_Check() {
	p := egress.IPPolicy{
		AllowCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
	}
	for _, a := range []string{
		"93.184.216.34:443", "10.1.2.3:443", "10.96.0.1:443", "192.168.1.1:443",
		"127.0.0.1:443", "[::ffff:169.254.169.254]:80", "[64:ff9b::7f00:1]:443",
	} {
		err := p.Check(netip.MustParseAddrPort(a))
		var de *egress.DestinationError
		if errors.As(err, &de) {
			fmt.Printf("%-28s %s (%s)\n", a, de.Refusal(), de.Reason)
		} else {
			fmt.Printf("%-28s allowed\n", a)
		}
	}
	// Output:
	// 93.184.216.34:443            allowed
	// 10.1.2.3:443                 allowed
	// 10.96.0.1:443                destination_refused (apiserver)
	// 192.168.1.1:443              destination_refused (private)
	// 127.0.0.1:443                destination_refused (loopback)
	// [::ffff:169.254.169.254]:80  destination_refused (metadata)
	// [64:ff9b::7f00:1]:443        destination_refused (loopback)
}

// An exchange through the port. The example server listens on loopback, so the policy allows
// loopback for development; the hosted policy would refuse it at dial time.
func ExampleTransport_Exchange() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer srv.Close()

	t, err := egress.NewTransport(egress.Policy{
		Endpoint:         srv.URL + "/mcp",
		IP:               egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe},
		MaxResponseBytes: 1 << 20,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	resp, err := t.Exchange(context.Background(), req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, string(resp.Body))

	// The same port refuses any other destination by name.
	req, _ = http.NewRequestWithContext(context.Background(), http.MethodPost, "https://169.254.169.254/latest/meta-data", nil)
	_, err = t.Exchange(context.Background(), req)
	if name := refusal.Name(err); name != "" {
		fmt.Println("refused:", name)
	}
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":{}}
	// refused: destination_refused
}

// The guarded dialer on its own: the policy is judged on the address connect(2) would use, so
// a name or literal that lands on loopback is refused before any packet is sent.
func ExampleNewDialer() {
	d := egress.NewDialer(egress.IPPolicy{}) // hosted: loopback refused
	_, err := d.DialContext(context.Background(), "tcp", "[::ffff:127.0.0.1]:8080")
	var de *egress.DestinationError
	if errors.As(err, &de) {
		fmt.Println(de.Refusal(), de.Reason, de.Addr)
	}
	// Output:
	// destination_refused loopback 127.0.0.1:8080
}
