package main

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/mcpclient"
)

func init() { register(newCallCmd) }

func newCallCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "call --tool NAME [--args JSON] (--url URL | -- CMD ARGS...)",
		Short: "Call one tool and print the complete result JSON",
		Args:  cobra.ArbitraryArgs,
	}
	sf := newServerFlags(cmd.Flags())
	tool := cmd.Flags().String("tool", "", "name of the tool to call")
	rawArgs := cmd.Flags().String("args", "{}", "arguments: one JSON object")
	markRequired(cmd, "tool")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if *tool == "" {
			return usagef("usage: %s", cmd.UseLine())
		}
		if !json.Valid([]byte(*rawArgs)) || !bytes.HasPrefix(bytes.TrimSpace([]byte(*rawArgs)), []byte("{")) {
			return usagef("--args: want one JSON object")
		}
		s, err := sf.connect(ctx, env, cmd, args)
		if err != nil {
			return err
		}
		defer s.Close()
		res, err := s.CallTool(ctx, *tool, json.RawMessage(*rawArgs))
		var te *mcpclient.ToolError
		if errors.As(err, &te) {
			if werr := writeRaw(env, te.Result); werr != nil {
				return werr
			}
			return &exitError{code: exitFailure, msg: "tool returned isError"}
		}
		if err != nil {
			return err
		}
		return writeRaw(env, res)
	})
	return cmd
}

// writeRaw prints a result exactly as received, followed by a newline.
func writeRaw(env *cliEnv, raw []byte) error {
	if _, err := env.stdout.Write(raw); err != nil {
		return err
	}
	_, err := env.stdout.Write([]byte("\n"))
	return err
}
