// Command image builds the connector-mcp image (internal/imagebuild) without Docker, pushes it to
// --repo and prints the index digest. `make image IMAGE_REPO=127.0.0.1:5000/connector-mcp` runs it.
//
// The source date is $SOURCE_DATE_EPOCH, or the commit time of HEAD; the revision and version
// default to `git rev-parse HEAD` and `git describe --tags --always`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/internal/imagebuild"
)

func main() {
	os.Exit(run())
}

func git(args ...string) string {
	out, err := exec.CommandContext(context.Background(), "git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func run() int {
	repo := flag.String("repo", os.Getenv("IMAGE_REPO"), "Repository to push to, e.g. 127.0.0.1:5000/connector-mcp (plain HTTP only for loopback).")
	tag := flag.String("tag", "", "Tag to push as well as the digest (default: none).")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated linux/<arch> platforms.")
	revision := flag.String("revision", "", "org.opencontainers.image.revision (default: git rev-parse HEAD).")
	version := flag.String("version", "", "org.opencontainers.image.version (default: git describe --tags --always).")
	sbomOut := flag.String("sbom-out", "", "Also write the SPDX SBOM to this file.")
	flag.Parse()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "image: "+format+"\n", args...)
		return 1
	}
	if *repo == "" {
		return fail("--repo (or IMAGE_REPO) is required")
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		epoch = git("log", "-1", "--format=%ct")
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fail("SOURCE_DATE_EPOCH %q is not a Unix time (and git log gave none)", epoch)
	}
	if *revision == "" {
		*revision = git("rev-parse", "HEAD")
	}
	if *version == "" {
		*version = git("describe", "--tags", "--always")
	}
	dir, err := os.Getwd()
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := imagebuild.Options{
		ModuleDir: dir, Binaries: imagebuild.DefaultBinaries(dir), Platforms: strings.Split(*platforms, ","),
		SourceDate: time.Unix(secs, 0).UTC(), Source: imagebuild.DefaultSource, Revision: *revision, Version: *version,
	}
	built, err := imagebuild.Build(ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	if *sbomOut != "" {
		if err := os.WriteFile(*sbomOut, built.SBOM, 0o644); err != nil {
			return fail("%v", err)
		}
	}
	pushed, err := imagebuild.Push(ctx, built, *repo, *tag)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "image: pushed %s (platforms %s, SBOM referrer %s)\n", pushed.Ref, *platforms, pushed.SBOMDigest)
	fmt.Println(pushed.Digest.String())
	return 0
}
