package oauth_test

import (
	"testing"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// FuzzCanonicalResource checks that canonicalization is idempotent (a stored key is found again
// from its own resource) and never accepts user information.
func FuzzCanonicalResource(f *testing.F) {
	for _, s := range []string{"https://MCP.example.com:443/mcp", "http://[::1]:80/", "https://u@h/", "http://h:8080/a/../b#x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := oauth.CanonicalResource(s)
		if err != nil {
			return
		}
		again, err := oauth.CanonicalResource(c)
		if err != nil || again != c {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", s, c, again, err)
		}
	})
}
