package gatewayapp

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// TestFlagsAreTheDecidedInterface pins the flag names others build on (chart, docs).
func TestFlagsAreTheDecidedInterface(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
	o.BindFlags(fs)
	want := map[string]string{
		"listen-address": ":8443", "tls-cert-file": "", "tls-key-file": "", "plain-http-unsafe": "false",
		"audience": "connector-mcp", "authz-cache-ttl": "10s", "token-cache-ttl": "5m0s", "max-inflight": "256",
		"max-inflight-per-caller": "8", "call-timeout": "1m0s", "max-request-bytes": "1048576",
		"metrics-bind-address": ":8080", "metrics-secure": "true", "enable-http2": "false", "health-probe-bind-address": ":8081", "allowed-hosts": "[]",
		// The bounds of a stalled body, a search and failed authentications.
		"body-read-timeout": "10s", "max-search-reviews": "256", "auth-failure-rate": "1", "auth-failure-burst": "10",
		"auth-negative-cache-ttl": "10s",
		// The trust and egress flags shared with the manager.
		"skip-provenance-unsafe": "false", "keyless-without-tlog-unsafe": "false", "trusted-root": "", "default-identity-issuer": "", "default-public-key": "",
		"default-source-repository": "", "default-source-ref": "", "egress-allow-cidr": "[]", "service-cidr": "[]", "allow-loopback-unsafe": "false",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, def)
		}
	}
}

// TestTLSRequiredUnlessUnsafe: the defaults refuse to start without a serving certificate; a
// certificate or the ...Unsafe development flag satisfies validation.
func TestTLSRequiredUnlessUnsafe(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("Validate without TLS = %v, want the TLS flags named", err)
	}
	o.TLSCertFile, o.TLSKeyFile = "tls.crt", "tls.key"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with TLS = %v", err)
	}
	o = DefaultOptions()
	o.PlainHTTPUnsafe = true
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with --plain-http-unsafe = %v", err)
	}
	o.MaxInflightPerCaller = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--max-inflight-per-caller") {
		t.Fatalf("Validate with zero per-caller limit = %v", err)
	}
}

// TestServerTimeouts: the body has a read deadline and the answer a write deadline above the call
// timeout (a call that runs to --call-timeout is still written); the twin: a non-positive body
// read timeout or search bound, or a zero failure budget, is refused by name.
func TestServerTimeouts(t *testing.T) {
	o := DefaultOptions()
	hdr, read, write := o.ServerTimeouts()
	if hdr <= 0 || read < hdr+o.BodyReadTimeout || write <= o.BodyReadTimeout+o.CallTimeout {
		t.Fatalf("timeouts header %v read %v write %v with body %v call %v", hdr, read, write, o.BodyReadTimeout, o.CallTimeout)
	}
	o.PlainHTTPUnsafe = true
	for flag, mod := range map[string]func(*Options){
		"--body-read-timeout":  func(o *Options) { o.BodyReadTimeout = 0 },
		"--max-search-reviews": func(o *Options) { o.MaxSearchReviews = 0 },
		"--auth-failure-burst": func(o *Options) { o.AuthFailureBurst = 0 },
		"--auth-failure-rate":  func(o *Options) { o.AuthFailureRate = 0 },
	} {
		bad := o
		mod(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate with a bad %s = %v", flag, err)
		}
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// TestSetupRequiresValidatedOptions: Validate is the gateway's one validation, so Setup refuses
// options no Validate accepted (before it touches the manager) instead of validating again; a
// Validate that fails, after one that passed, leaves the options unvalidated. The shared trust,
// egress and TLS checks are part of it.
func TestSetupRequiresValidatedOptions(t *testing.T) {
	o := DefaultOptions()
	o.PlainHTTPUnsafe = true
	if _, err := Setup(nil, o, logr.Discard(), false); !errors.Is(err, ErrNotValidated) {
		t.Fatalf("Setup without Validate = %v, want ErrNotValidated", err)
	}
	if err := o.Validate(); err != nil || !o.validated {
		t.Fatalf("Validate = %v, validated %v", err, o.validated)
	}
	for flag, mod := range map[string]func(*Options){
		"--egress-allow-cidr":       func(o *Options) { o.EgressAllowCIDRs = []string{"not-a-cidr"} },
		"--default-identity-issuer": func(o *Options) { o.DefaultSubject = "ci" },
		"--ca-bundle-file":          func(o *Options) { o.CABundleFile = filepath.Join(t.TempDir(), "absent.crt") },
	} {
		bad := o
		mod(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate with a bad %s = %v", flag, err)
		}
		if _, err := Setup(nil, bad, logr.Discard(), false); !errors.Is(err, ErrNotValidated) {
			t.Errorf("Setup after a failed Validate (%s) = %v, want ErrNotValidated", flag, err)
		}
	}
}
