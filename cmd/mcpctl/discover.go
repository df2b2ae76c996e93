package main

import (
	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/snapshot"
)

func init() { register(newDiscoverCmd) }

// discoverOutput is the JSON printed by "mcpctl discover".
type discoverOutput struct {
	Era             string              `json:"era"`
	ProtocolVersion string              `json:"protocolVersion"`
	ServerInfo      snapshot.ServerInfo `json:"serverInfo"`
}

func newDiscoverCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "discover (--url URL | -- CMD ARGS...)",
		Short: "Negotiate with a server and print its era and identity",
		Args:  cobra.ArbitraryArgs,
	}
	sf := newServerFlags(cmd.Flags(), useNegotiate)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		s, err := sf.connect(ctx, env, cmd, args)
		if err != nil {
			return err
		}
		defer s.Close()
		return writeJSON(env.stdout, discoverOutput{Era: string(s.Era()), ProtocolVersion: s.ProtocolVersion(), ServerInfo: s.ServerInfo()})
	})
	return cmd
}
