package main

import (
	"fmt"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
)

// reviewedOp is one operation of a reviewed profile.
type reviewedOp struct {
	ref, remote, effect string
}

// reviewResult is a reviewed profile: its YAML (the form `mcpctl pack push` reads), its operations
// in profile order, and the operationRef of each remote tool.
type reviewResult struct {
	yaml     []byte
	ops      []reviewedOp
	opByTool map[string]string
}

// applyReview plays the reviewer on a draft profile (`mcpctl profile init` output): each
// operation's effect becomes decisions[remote tool name]. The result must pass ocipack.Validate,
// the check a pack push and the manager apply, so an operation without a decision fails with
// errUnreviewed (and the refusal unreviewed) instead of reaching the registry.
func applyReview(draft []byte, decisions map[string]string) (*reviewResult, error) {
	doc, err := ocipack.DecodeProfile(draft)
	if err != nil {
		return nil, fmt.Errorf("decode the draft profile: %w", err)
	}
	r := &reviewResult{opByTool: map[string]string{}}
	for i := range doc.Operations {
		op := &doc.Operations[i]
		if e, ok := decisions[op.RemoteName]; ok {
			op.Effect = apiv1.Effect(e)
		}
		r.ops = append(r.ops, reviewedOp{ref: op.OperationRef, remote: op.RemoteName, effect: string(op.Effect)})
		r.opByTool[op.RemoteName] = op.OperationRef
	}
	if err := ocipack.ValidateEffects(doc); err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreviewed, err)
	}
	if err := ocipack.Validate(doc); err != nil {
		return nil, fmt.Errorf("the reviewed profile does not validate: %w", err)
	}
	if r.yaml, err = ocipack.EncodeProfile(doc, ocipack.FormatYAML); err != nil {
		return nil, err
	}
	return r, nil
}
