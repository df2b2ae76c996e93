package managerapp

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// --verified-pack-namespace defaults to $POD_NAMESPACE in the binaries (ApplyEnvDefaults), an
// explicit value (even empty: the store disabled) wins, and DefaultOptions itself never reads the
// environment.
func TestVerifiedPackNamespaceDefault(t *testing.T) {
	env := func(k string) string {
		if k == appoptions.EnvPodNamespace {
			return "connector-mcp-system"
		}
		return ""
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "connector-mcp-system"},
		{[]string{"--verified-pack-namespace="}, ""},
		{[]string{"--verified-pack-namespace=ops"}, "ops"},
	} {
		o := DefaultOptions()
		if o.VerifiedPackNamespace != "" {
			t.Fatalf("DefaultOptions: %q, want empty", o.VerifiedPackNamespace)
		}
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o.ApplyEnvDefaults(fs, env)
		if o.VerifiedPackNamespace != tc.want {
			t.Fatalf("args %v: %q, want %q", tc.args, o.VerifiedPackNamespace, tc.want)
		}
	}
}

// A store with no sweep period is refused.
func TestVerifiedPackSweepIntervalValidated(t *testing.T) {
	o := DefaultOptions()
	o.VerifiedPackNamespace = "ns"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.VerifiedPackSweepInterval = 0
	if err := o.Validate(); err == nil {
		t.Fatal("a zero --verified-pack-sweep-interval was accepted")
	}
}
