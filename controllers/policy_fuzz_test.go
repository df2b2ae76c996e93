package controllers

import (
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NormalizeEndpoint is idempotent and never keeps userinfo, a query or a fragment; SanitizeURL
// never keeps them either.
func FuzzNormalizeEndpoint(f *testing.F) {
	for _, s := range []string{
		"https://MCP.Example.com/mcp", "https://user:pw@mcp.example.com:443/mcp?token=x#f",
		"http://127.0.0.1:8080", "https://[::1]/mcp", "https://h/a/../b", "https://h:0443/%2e", "http://h:80/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if s := SanitizeURL(raw); s != "(invalid URL)" && leaks(s) {
			t.Fatalf("SanitizeURL(%q) = %q keeps userinfo, query or fragment", raw, s)
		}
		n, err := NormalizeEndpoint(raw)
		if err != nil {
			return
		}
		if leaks(n) {
			t.Fatalf("NormalizeEndpoint(%q) = %q keeps userinfo, query or fragment", raw, n)
		}
		again, err := NormalizeEndpoint(n)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", raw, n, again, err)
		}
	})
}

// leaks reports whether a rendered URL carries userinfo, a query or a fragment.
func leaks(s string) bool {
	u, err := url.Parse(s)
	return err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#")
}

// Whatever the claims, the earliest deployment is never refused, and every refusal names a
// holder that came first.
func FuzzFindCollisionFirstComeKeepsIt(f *testing.F) {
	f.Add(uint8(3), []byte{0, 1, 0, 2, 1, 1})
	f.Add(uint8(5), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, n uint8, picks []byte) {
		count := int(n%8) + 1
		base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		claims := make([]Claim, count)
		pick := func(i, k int) byte {
			if len(picks) == 0 {
				return 0
			}
			return picks[(i*3+k)%len(picks)] % 3
		}
		for i := range claims {
			claims[i] = Claim{
				Key:        "ns/d" + string(rune('a'+i)),
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
		if serr := FindCollision(earliest, claims); serr != nil {
			t.Fatalf("the earliest claim %s was refused: %v", earliest.Key, serr)
		}
		for _, c := range claims {
			serr := FindCollision(c, claims)
			if serr == nil {
				continue
			}
			named := false
			for _, h := range claims {
				if strings.HasSuffix(serr.Message, "ServiceDeployment "+h.Key) {
					named = true
					if !h.before(c) {
						t.Fatalf("%s refused in favour of %s, which came later", c.Key, h.Key)
					}
				}
			}
			if !named {
				t.Fatalf("refusal does not name a holder: %q", serr.Message)
			}
		}
	})
}
