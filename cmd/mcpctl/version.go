package main

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// goSDKModule is the MCP SDK whose pinned version "mcpctl version" reports.
const goSDKModule = "github.com/modelcontextprotocol/go-sdk"

// version is mcpctl's version, set at link time:
//
//	go build -ldflags "-X main.version=v0.2.0" ./cmd/mcpctl
//
// When empty, the main module version from the build information is used ("(devel)" for a
// plain "go build" in a checkout).
var version string

// commit is the git revision mcpctl was built from, set at link time like version
// (-X main.commit=$(git rev-parse HEAD)); when empty, the build information's vcs.revision.
var commit string

func init() { register(newVersionCmd) }

// versionOutput is the JSON printed by "mcpctl version".
type versionOutput struct {
	// Version is mcpctl's version (ldflags -X main.version, else the build information).
	Version string `json:"version"`
	// Commit is the git revision mcpctl was built from (the build information's vcs.revision,
	// with "-dirty" when the tree had local changes), or "unknown".
	Commit string `json:"commit"`
	// GoSDK is the linked github.com/modelcontextprotocol/go-sdk version.
	GoSDK string `json:"goSDK"`
	// Go is the Go toolchain mcpctl was built with.
	Go string `json:"go"`
}

// cliVersion returns mcpctl's version: the link-time value, else the main module version from the
// build information, else "(devel)".
func cliVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// buildCommit returns the link-time commit, else the git revision of the build information
// (recorded by go build inside a git checkout unless -buildvcs=false), else "unknown".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

// versionInfo is what "mcpctl version" and "mcpctl --version" report.
func versionInfo() versionOutput {
	return versionOutput{Version: cliVersion(), Commit: buildCommit(), GoSDK: goSDKVersion(), Go: runtime.Version()}
}

// goSDKVersion returns the linked go-sdk version from the build information ("unknown" when the
// binary carries none).
func goSDKVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path != goSDKModule {
			continue
		}
		if d.Replace != nil {
			return d.Replace.Version
		}
		return d.Version
	}
	return "unknown"
}

func newVersionCmd(env *cliEnv) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mcpctl's version, commit and the pinned MCP go-sdk version (JSON)",
		Args:  cobra.NoArgs,
		RunE: action(func(*cobra.Command, []string) error {
			return writeJSON(env.stdout, versionInfo())
		}),
	}
}
