package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { register(newSnapshotCmd) }

func newSnapshotCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot (--url URL | -- CMD ARGS...)",
		Short: "List a server's tools and print the ToolSnapshot",
		Args:  cobra.ArbitraryArgs,
	}
	sf := newServerFlags(cmd.Flags(), useList)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		snap, err := sf.liveSnapshot(cmd.Context(), env, cmd, args)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "snapshot: %d tools, %d warnings, digest %s\n", len(snap.Tools), len(snap.Warnings), snap.Digest)
		for _, w := range snap.Warnings {
			fmt.Fprintf(env.stderr, "warning: tool %q %s at %q\n", w.Tool, w.Code, w.Path)
		}
		return writeJSON(env.stdout, snap)
	})
	return cmd
}
