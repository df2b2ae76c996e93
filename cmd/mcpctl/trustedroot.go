package main

import (
	"github.com/spf13/cobra"
)

func init() { register(newTrustedRootCmd) }

func newTrustedRootCmd(env *cliEnv) *cobra.Command {
	return groupCmd("trusted-root", "Fetch sigstore's trusted_root.json over TUF, verified, for the manager's ConfigMap", newTrustedRootFetchCmd(env))
}

func newTrustedRootFetchCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fetch [--trusted-root-tuf-url URL --trusted-root-tuf-root FILE]",
		Short: "Print trusted_root.json fetched over TUF and verified against its anchor (default: public-good Sigstore)",
		Long: `Print trusted_root.json fetched over TUF and verified against its anchor: public-good Sigstore's
repository and the root built into sigstore-go by default, or --trusted-root-tuf-url anchored in
--trusted-root-tuf-root. Put it into the manager's ConfigMap (chart value
policy.trustedRootConfigMap, key trusted_root.json) for clusters that do not reach TUF themselves.`,
		Args: cobra.NoArgs,
	}
	var vf verifyFlags
	cmd.Flags().StringVar(&vf.tufURL, "trusted-root-tuf-url", "", "TUF repository serving trusted_root.json (default: public-good Sigstore)")
	cmd.Flags().StringVar(&vf.tufRoot, "trusted-root-tuf-root", "", "TUF root.json anchoring --trusted-root-tuf-url (default: public-good Sigstore's root, built in)")
	var eg egressFlags
	eg.register(cmd.Flags())
	cmd.RunE = action(func(*cobra.Command, []string) error {
		tr, err := vf.fetchTrustedRoot(env, &eg)
		if err != nil {
			return err
		}
		b, err := tr.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = env.stdout.Write(append(b, '\n'))
		return err
	})
	return cmd
}
