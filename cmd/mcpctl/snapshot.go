package main

import (
	"context"
	"fmt"
)

func init() {
	register("snapshot", verb{summary: "list a server's tools and print the ToolSnapshot", run: runSnapshot})
}

func runSnapshot(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("snapshot")
	sf := newServerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	snap, err := sf.liveSnapshot(ctx, env, fs)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "snapshot: %d tools, %d warnings, digest %s\n", len(snap.Tools), len(snap.Warnings), snap.Digest)
	for _, w := range snap.Warnings {
		fmt.Fprintf(env.stderr, "warning: tool %q %s at %q\n", w.Tool, w.Code, w.Path)
	}
	return writeJSON(env.stdout, snap)
}
