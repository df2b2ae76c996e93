package appoptions

import (
	"strings"
	"testing"
)

// TestValidate: the verification and egress checks, each naming the flag at fault.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Shared)
		err    string
	}{
		{"defaults", func(*Shared) {}, ""},
		{"subject without issuer", func(o *Shared) { o.DefaultSubject = "ci" }, "--default-identity-issuer"},
		{"subject and regexp", func(o *Shared) {
			o.DefaultIssuer, o.DefaultSubject, o.DefaultSubjectRegExp = "https://i", "a", "b"
		}, "at most one"},
		{"repository without ref", func(o *Shared) { o.DefaultSourceRepository = "git+https://x" }, "go together"},
		{"bad Service CIDR", func(o *Shared) { o.ServiceCIDRs = []string{"10.96.0.0/99"} }, "--service-cidr"},
		{"unanchored default subject regexp", func(o *Shared) {
			o.DefaultIssuer, o.DefaultSubjectRegExp = "https://i", "^https://github.com/acme/"
		}, "unanchored_subject_regexp"},
		{"default subject regexp anchored in text only", func(o *Shared) {
			o.DefaultIssuer, o.DefaultSubjectRegExp = "https://i", "^https://github.com/acme/|x$"
		}, "unanchored_subject_regexp"},
		{"anchored default subject regexp", func(o *Shared) {
			o.DefaultIssuer, o.DefaultSubjectRegExp = "https://i", "^https://github.com/acme/.*$"
		}, ""},
		{"issuer without subject", func(o *Shared) { o.DefaultIssuer = "https://i" }, "needs --default-identity-subject"},
		{"bad CIDR", func(o *Shared) { o.EgressAllowCIDRs = []string{"not-a-cidr"} }, "--egress-allow-cidr"},
		{"bad gateway Service", func(o *Shared) { o.GatewayService = "no-namespace" }, "--gateway-service"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultShared()
			tc.mutate(&o)
			err := o.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.err)
			}
		})
	}
}
