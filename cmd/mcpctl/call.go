package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/b10x/connector-mcp/mcpclient"
)

func init() {
	register("call", verb{summary: "call one tool and print the complete result JSON", run: runCall})
}

func runCall(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet("call")
	sf := newServerFlags(fs)
	tool := fs.String("tool", "", "name of the tool to call")
	rawArgs := fs.String("args", "{}", "arguments: one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tool == "" {
		return usagef("usage: mcpctl call --tool NAME [--args JSON] (--url URL | -- CMD ARGS...)")
	}
	if !json.Valid([]byte(*rawArgs)) || !bytes.HasPrefix(bytes.TrimSpace([]byte(*rawArgs)), []byte("{")) {
		return usagef("--args: want one JSON object")
	}
	s, err := sf.connect(ctx, env, fs)
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
}

// writeRaw prints a result exactly as received, followed by a newline.
func writeRaw(env *cliEnv, raw []byte) error {
	if _, err := env.stdout.Write(raw); err != nil {
		return err
	}
	_, err := env.stdout.Write([]byte("\n"))
	return err
}
