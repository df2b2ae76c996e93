package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

func init() { register(newProfileCmd) }

func newProfileCmd(env *cliEnv) *cobra.Command {
	return groupCmd("profile", "Draft a profile from a snapshot (init) or check a profile against a live server (check)",
		newProfileInitCmd(env), newProfileCheckCmd(env))
}

// maxSnapshotFile bounds a snapshot file read by "profile init".
const maxSnapshotFile = 16 << 20

// readSnapshot reads a ToolSnapshot as printed by "mcpctl snapshot" (path "-" is stdin) and
// reconstructs its digests; a snapshot whose digests do not reconstruct is refused.
func readSnapshot(env *cliEnv, path string) (*snapshot.ToolSnapshot, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(env.stdin, maxSnapshotFile+1))
		if err == nil && len(b) > maxSnapshotFile {
			err = fmt.Errorf("stdin: snapshot larger than %d bytes", maxSnapshotFile)
		}
	} else {
		b, err = readBounded(path, maxSnapshotFile)
	}
	if err != nil {
		return nil, err
	}
	// Refuse duplicate keys and invalid UTF-8 before decoding: the descriptors are evidence.
	if _, err := snapshot.Canonicalize(b); err != nil {
		return nil, err
	}
	// Exact-case members: encoding/json would let "Tools" and "Digest" case variants replace
	// the tools and digest that every case-sensitive reader of the file sees.
	var s snapshot.ToolSnapshot
	if err := snapshot.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: not a tool snapshot: %w", path, err)
	}
	if len(s.Tools) == 0 {
		return nil, fmt.Errorf("%s: snapshot has no tools", path)
	}
	if err := s.Verify(); err != nil {
		return nil, err
	}
	return &s, nil
}

func newProfileInitCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init --snapshot FILE [--service-ref REF] [--connection-ref REF]",
		Short: "Draft a profile document (YAML) from a snapshot printed by \"mcpctl snapshot\"",
		Args:  cobra.ArbitraryArgs,
	}
	snap := cmd.Flags().String("snapshot", "", "snapshot JSON file from \"mcpctl snapshot\" (- for stdin)")
	serviceRef := cmd.Flags().String("service-ref", "", "service reference (default: derived from the server name)")
	connRef := cmd.Flags().String("connection-ref", "", "Connection reference (default: the service reference)")
	markRequired(cmd, "snapshot")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if *snap == "" || len(args) != 0 {
			return usagef("usage: %s", cmd.UseLine())
		}
		return profileInit(env, *snap, *serviceRef, *connRef)
	})
	return cmd
}

func profileInit(env *cliEnv, snapPath, serviceRef, connRef string) error {
	s, err := readSnapshot(env, snapPath)
	if err != nil {
		return err
	}
	// Warnings are recomputed from the descriptors, not taken from the file.
	descs := make([]json.RawMessage, len(s.Tools))
	for i, t := range s.Tools {
		descs[i] = t.Descriptor
	}
	if fresh, err := snapshot.New(s.ProtocolVersion, s.ServerInfo, descs); err == nil {
		for _, w := range fresh.Warnings {
			fmt.Fprintf(env.stderr, "warning: tool %q %s at %q: review this descriptor closely\n", w.Tool, w.Code, w.Path)
		}
	}
	doc := ocipack.Draft(s)
	if serviceRef != "" {
		doc.Service.Ref, doc.Service.ConnectionRef = serviceRef, serviceRef
	}
	if connRef != "" {
		doc.Service.ConnectionRef = connRef
	}
	if err := ocipack.ValidateFields(doc); err != nil {
		return err
	}
	y, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "draft profile with %d operation(s); set every effect (read, write, destructive) before packing\n", len(doc.Operations))
	fmt.Fprint(env.stdout, "# Draft profile: every effect is \"unreviewed\" and is refused until a reviewer sets read,\n# write or destructive. Titles and operation references are placeholders.\n")
	_, err = env.stdout.Write(y)
	return err
}

// checkReport is the JSON output of "profile check".
type checkReport struct {
	// Service is the profile's service reference.
	Service string `json:"service"`
	// Recorded is the profile's snapshot digest.
	Recorded string `json:"recorded"`
	// Live is the live snapshot digest.
	Live string `json:"live"`
	// Drift is true when the live snapshot differs from the recorded one.
	Drift bool `json:"drift"`
	// Diff lists protocol, added, removed and changed tools by name and digest.
	Diff snapshot.Diff `json:"diff"`
}

func newProfileCheckCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check --profile FILE (--url URL | -- CMD ARGS...)",
		Short: "Compare a profile's recorded snapshot with the live server (exit 4 on drift, 3 while an effect is unreviewed)",
		Args:  cobra.ArbitraryArgs,
	}
	profilePath := cmd.Flags().String("profile", "", "profile document (YAML or JSON)")
	markRequired(cmd, "profile")
	sf := newServerFlags(cmd.Flags(), useList)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if *profilePath == "" {
			return usagef("usage: %s", cmd.UseLine())
		}
		return profileCheck(cmd.Context(), env, sf, *profilePath, cmd, args)
	})
	return cmd
}

func profileCheck(ctx context.Context, env *cliEnv, sf *serverFlags, profilePath string, cmd *cobra.Command, args []string) error {
	doc, err := readProfile(profilePath)
	if err != nil {
		return err
	}
	// A draft may be checked too: only the recorded snapshot matters here.
	if err := ocipack.ValidateDraft(doc); err != nil {
		return err
	}
	recorded, err := ocipack.SnapshotOf(doc)
	if err != nil {
		return err
	}
	live, err := sf.liveSnapshot(ctx, env, cmd, args)
	if err != nil {
		return err
	}
	diff := snapshot.Compare(recorded, live)
	rep := checkReport{Service: doc.Service.Ref, Recorded: recorded.Digest, Live: live.Digest, Drift: !diff.Empty(), Diff: diff}
	// A check that passes means the file is ready to pack: a document that still carries an
	// "unreviewed" effect (a draft, or one from "review repin") is refused after the readable
	// drift report on stderr. Like every refusal it leaves stdout empty.
	unreviewed := ocipack.ValidateEffects(doc)
	if unreviewed == nil {
		if err := writeJSON(env.stdout, rep); err != nil {
			return err
		}
	}
	if !rep.Drift {
		fmt.Fprintln(env.stderr, "no drift: live snapshot", live.Digest, "matches the profile")
	} else {
		fmt.Fprint(env.stderr, formatDiff(diff))
	}
	if unreviewed != nil {
		return unreviewed
	}
	if rep.Drift {
		return &driftError{msg: summarizeDiff(diff)}
	}
	return nil
}

// formatDiff renders a diff for people, one line per change, names and digests only.
func formatDiff(d snapshot.Diff) string {
	var b strings.Builder
	if d.ProtocolFrom != d.ProtocolTo {
		fmt.Fprintf(&b, "~ protocol %s -> %s\n", d.ProtocolFrom, d.ProtocolTo)
	}
	for _, t := range d.Removed {
		fmt.Fprintf(&b, "- removed %q %s\n", t.Name, t.Digest)
	}
	for _, t := range d.Added {
		fmt.Fprintf(&b, "+ added   %q %s\n", t.Name, t.Digest)
	}
	for _, t := range d.Changed {
		fmt.Fprintf(&b, "~ changed %q %s -> %s\n", t.Name, t.From, t.To)
	}
	return b.String()
}

func summarizeDiff(d snapshot.Diff) string {
	var parts []string
	if d.ProtocolFrom != d.ProtocolTo {
		parts = append(parts, "protocol changed")
	}
	for _, p := range []struct {
		n    int
		what string
	}{{len(d.Added), "added"}, {len(d.Removed), "removed"}, {len(d.Changed), "changed"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d tool(s) %s", p.n, p.what))
		}
	}
	return "live server differs from the profile: " + strings.Join(parts, ", ")
}
