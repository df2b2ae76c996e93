package appoptions

import "github.com/spf13/pflag"

// EnvPodNamespace is the environment variable (set from the downward API by config/manager,
// config/gateway) that --verified-pack-namespace defaults to.
const EnvPodNamespace = "POD_NAMESPACE"

// VerifiedPackNamespaceFlag names the verified-pack store's namespace in both binaries: the
// manager writes the store there, the gateway reads it.
const VerifiedPackNamespaceFlag = "verified-pack-namespace"

// ApplyPodNamespaceDefault sets *ns to $POD_NAMESPACE (read with getenv) unless
// --verified-pack-namespace was given on fs (parsed). The binaries call it after parsing their
// flags; tests, which build their options themselves, are not affected by the environment they
// run in.
func ApplyPodNamespaceDefault(fs *pflag.FlagSet, ns *string, getenv func(string) string) {
	if f := fs.Lookup(VerifiedPackNamespaceFlag); f != nil && !f.Changed {
		*ns = getenv(EnvPodNamespace)
	}
}
