package main

import (
	"context"

	"github.com/b10x/connector-mcp/snapshot"
)

func init() {
	register("discover", verb{summary: "negotiate with a server and print its era and identity", run: runDiscover})
}

// discoverOutput is the JSON printed by "mcpctl discover".
type discoverOutput struct {
	Era             string              `json:"era"`
	ProtocolVersion string              `json:"protocolVersion"`
	ServerInfo      snapshot.ServerInfo `json:"serverInfo"`
}

func runDiscover(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("discover")
	sf := newServerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := sf.connect(ctx, env, fs)
	if err != nil {
		return err
	}
	defer s.Close()
	return writeJSON(env.stdout, discoverOutput{Era: string(s.Era()), ProtocolVersion: s.ProtocolVersion(), ServerInfo: s.ServerInfo()})
}
