package controllers

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// normalizeEndpoint is idempotent and never keeps userinfo, a query or a fragment; SanitizeURL
// never keeps them either. Spelling variants of the same endpoint (upper-case host, a trailing
// dot, escaped unreserved characters, lower-case escapes) normalize alike.
func FuzzNormalizeEndpoint(f *testing.F) {
	for _, s := range []string{
		"https://MCP.Example.com/mcp", "https://user:pw@mcp.example.com:443/mcp?token=x#f",
		"http://127.0.0.1:8080", "https://[::1]/mcp", "https://h/a/../b", "https://h:0443/%2e", "http://h:80/",
		"https://h./m%63p", "https://h/a%2fb", "https://H.example.COM./x%7e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if s := activation.SanitizeURL(raw); s != "(invalid URL)" && leaks(s) {
			t.Fatalf("SanitizeURL(%q) = %q keeps userinfo, query or fragment", raw, s)
		}
		n, err := normalizeEndpoint(raw)
		if err != nil {
			return
		}
		if leaks(n) {
			t.Fatalf("normalizeEndpoint(%q) = %q keeps userinfo, query or fragment", raw, n)
		}
		again, err := normalizeEndpoint(n)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", raw, n, again, err)
		}
		if v := variant(n); v != "" {
			if nv, err := normalizeEndpoint(v); err != nil || nv != n {
				t.Fatalf("variant %q of %q normalizes to %q (%v), want %q", v, raw, nv, err, n)
			}
		}
	})
}

// variant respells a normalized endpoint: upper-case host with a trailing dot, every unreserved
// path character escaped in lower-case hex, and every existing escape in lower case. "" when the
// host is an IP literal (no trailing dot there).
func variant(n string) string {
	u, err := url.Parse(n)
	if err != nil || strings.HasPrefix(u.Host, "[") || net.ParseIP(u.Hostname()) != nil {
		return ""
	}
	var b strings.Builder
	p := u.EscapedPath()
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '%' && i+2 < len(p):
			b.WriteString(strings.ToLower(p[i : i+3]))
			i += 2
		case isUnreserved(c):
			fmt.Fprintf(&b, "%%%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	return u.Scheme + "://" + strings.ToUpper(u.Hostname()) + ".:" + u.Port() + b.String()
}

// leaks reports whether a rendered URL carries userinfo, a query or a fragment.
func leaks(s string) bool {
	u, err := url.Parse(s)
	return err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#")
}

// Whatever the claims, the earliest deployment is never refused, every refusal names a holder
// that came first when it is in the same namespace, and never names another namespace's one.
func FuzzFindCollisionFirstComeKeepsIt(f *testing.F) {
	f.Add(uint8(3), []byte{0, 1, 0, 2, 1, 1})
	f.Add(uint8(5), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, n uint8, picks []byte) {
		count := int(n%8) + 1
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		claims := make([]bundleClaim, count)
		pick := func(i, k int) byte {
			if len(picks) == 0 {
				return 0
			}
			return picks[(i*3+k)%len(picks)] % 3
		}
		for i := range claims {
			claims[i] = bundleClaim{
				Key:        "ns" + string(rune('0'+pick(i, 1)%2)) + "/d" + string(rune('a'+i)),
				Created:    metav1.NewTime(base.Add(time.Duration(pick(i, 0)) * time.Minute)),
				Provider:   "p" + string(rune('0'+pick(i, 1))),
				Authority:  "https://h" + string(rune('0'+pick(i, 2))) + ":443/",
				Operations: []string{"c/op" + string(rune('0'+pick(i, 0)))},
			}
		}
		earliest := claims[0]
		for _, c := range claims[1:] {
			if c.before(earliest) {
				earliest = c
			}
		}
		if serr := findCollision(earliest, claims); serr != nil {
			t.Fatalf("the earliest claim %s was refused: %v", earliest.Key, serr)
		}
		for _, c := range claims {
			serr := findCollision(c, claims)
			if serr == nil {
				continue
			}
			named := false
			for _, h := range claims {
				if strings.Contains(serr.Message(), h.Key) && namespaceOf(h.Key) != namespaceOf(c.Key) {
					t.Fatalf("refusal of %s names %s of another namespace: %q", c.Key, h.Key, serr.Message())
				}
				if strings.HasSuffix(serr.Message(), "ServiceDeployment "+h.Key) {
					named = true
					if !h.before(c) {
						t.Fatalf("%s refused in favour of %s, which came later", c.Key, h.Key)
					}
				}
			}
			if !named && !strings.HasSuffix(serr.Message(), "held by another deployment, in another namespace") {
				t.Fatalf("refusal names no holder: %q", serr.Message())
			}
		}
	})
}
