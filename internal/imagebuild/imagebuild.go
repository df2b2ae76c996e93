// Package imagebuild builds the connector-mcp container image without a Docker daemon, the way ko
// does: static Go binaries (CGO_ENABLED=0, -trimpath, -buildvcs=false) in one layer on an empty
// base, user 65532, OCI labels, one image per platform under an OCI image index. Every timestamp
// is the source date (SOURCE_DATE_EPOCH, by default the commit time) and the layer tar is sorted,
// so two builds of the same commit with the same Go toolchain give the same index digest.
//
// Push writes the index to a registry and attaches an SPDX 2.3 JSON SBOM (from the binaries' Go
// build information) as an OCI 1.1 referrer whose subject is the image index. Plain HTTP is used
// only for loopback registries; a request over plain HTTP to any other host is refused with
// ErrPlainHTTPUnsafe.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image facts shared by `make image`, the Dockerfile and the Helm chart; TestDockerfileMatchesImage
// keeps the Dockerfile equal to them.
const (
	// User is the numeric user and group every binary runs as (distroless "nonroot").
	User = "65532:65532"
	// Entrypoint is the image's entrypoint: the manager.
	Entrypoint = "/manager"
	// BinaryMode is the file mode of every binary in the layer.
	BinaryMode = 0o555
	// SourceLabel, RevisionLabel and VersionLabel are the OCI labels (and index annotations) set
	// on every image.
	SourceLabel   = "org.opencontainers.image.source"
	RevisionLabel = "org.opencontainers.image.revision"
	VersionLabel  = "org.opencontainers.image.version"
	// DefaultSource is the source repository label value.
	DefaultSource = "https://github.com/b10x/connector-mcp"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoBinaries means Options.Binaries is empty.
	ErrNoBinaries = errors.New("imagebuild: no binaries to build")
	// ErrBadPlatform means a platform is not "linux/<arch>".
	ErrBadPlatform = errors.New("imagebuild: platform must be linux/<arch>")
	// ErrGoBuild means `go build` of a binary failed.
	ErrGoBuild = errors.New("imagebuild: go build failed")
	// ErrBadSourceDate means the source date is unset or before 1980 (tar and zip cannot hold it).
	ErrBadSourceDate = errors.New("imagebuild: source date must be set and after 1980-01-01")
)

// Binary is one program in the image, installed at "/"+Name.
type Binary struct {
	// Name is the file name in the image root, e.g. "manager".
	Name string
	// Package is the Go package to build, relative to the module root, e.g. "./cmd/manager".
	Package string
}

// Options configure Build.
type Options struct {
	// ModuleDir is the module root `go build` runs in.
	ModuleDir string
	// Binaries are the programs to install; DefaultBinaries lists the project's.
	Binaries []Binary
	// Platforms are "linux/<arch>" pairs, e.g. "linux/amd64".
	Platforms []string
	// SourceDate is every timestamp in the image (layer entries, config, history).
	SourceDate time.Time
	// Source, Revision and Version are the OCI label values.
	Source, Revision, Version string
	// GoCommand is the go binary (default "go" on PATH).
	GoCommand string
	// WorkDir holds the built binaries; a temporary directory when empty.
	WorkDir string
	// Entrypoint is the image's entrypoint; the Entrypoint constant (the manager) when empty.
	// Test images (devnode's pause, the e2e upstream and agents) name their own binary.
	Entrypoint string
}

// Built is the result of Build: the index (one image per platform) and its SBOM.
type Built struct {
	// Index is the OCI image index, one manifest per platform in Options.Platforms order.
	Index v1.ImageIndex
	// SBOM is the SPDX 2.3 JSON document describing the binaries and their Go modules.
	SBOM []byte
	// SourceDate is Options.SourceDate (the SBOM referrer's created annotation).
	SourceDate time.Time
}

// DefaultBinaries lists the project's binaries found under moduleDir: the manager always, the
// gateway when cmd/gateway exists.
func DefaultBinaries(moduleDir string) []Binary {
	bins := []Binary{{Name: "manager", Package: "./cmd/manager"}}
	if fi, err := os.Stat(filepath.Join(moduleDir, "cmd", "gateway")); err == nil && fi.IsDir() {
		bins = append(bins, Binary{Name: "gateway", Package: "./cmd/gateway"})
	}
	return bins
}

// Build compiles every binary for every platform and assembles the index. It does not push.
func Build(ctx context.Context, o Options) (*Built, error) {
	if len(o.Binaries) == 0 {
		return nil, ErrNoBinaries
	}
	if o.SourceDate.Before(time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)) {
		return nil, ErrBadSourceDate
	}
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("%w: no platforms", ErrBadPlatform)
	}
	if o.GoCommand == "" {
		o.GoCommand = "go"
	}
	work := o.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "connector-mcp-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	created := v1.Time{Time: o.SourceDate.UTC()}
	labels := map[string]string{SourceLabel: o.Source, RevisionLabel: o.Revision, VersionLabel: o.Version}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	var sbomBinary map[string]string // binary name -> path, for the SBOM (first platform)
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" || goarch == "" || strings.Contains(goarch, "/") {
			return nil, fmt.Errorf("%w: %q", ErrBadPlatform, p)
		}
		paths := map[string]string{}
		for _, b := range o.Binaries {
			out := filepath.Join(work, goos+"-"+goarch, b.Name)
			if err := goBuild(ctx, o, goos, goarch, b.Package, out); err != nil {
				return nil, err
			}
			paths[b.Name] = out
		}
		if sbomBinary == nil {
			sbomBinary = paths
		}
		layer, err := binaryLayer(o.Binaries, paths, o.SourceDate)
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: created, CreatedBy: "connector-mcp hack/image", Comment: binaryList(o.Binaries)},
		})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Created = goos, goarch, created
		cf.Author = "connector-mcp"
		cf.Config.User = User
		cf.Config.Entrypoint = []string{cmp.Or(o.Entrypoint, Entrypoint)}
		cf.Config.Labels = labels
		cf.Config.Env = []string{"PATH=/"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: goos, Architecture: goarch}},
		})
	}
	sbom, err := SPDX(o, sbomBinary)
	if err != nil {
		return nil, err
	}
	return &Built{Index: idx, SBOM: sbom, SourceDate: o.SourceDate}, nil
}

// binaryList names the binaries in layer order (the layer's tar is sorted by name).
func binaryList(bins []Binary) string {
	names := make([]string, 0, len(bins))
	for _, b := range bins {
		names = append(names, "/"+b.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// goBuild compiles pkg statically for goos/goarch into out, with a controlled environment: no
// cgo, no VCS stamping, paths trimmed, no build id, so the bytes depend only on the source and the
// toolchain.
func goBuild(ctx context.Context, o Options, goos, goarch, pkg, out string) error {
	//nolint:gosec // G204: the go command and package come from the caller (hack/image), never from input
	cmd := exec.CommandContext(ctx, o.GoCommand, "build", "-trimpath", "-buildvcs=false",
		"-ldflags=-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = o.ModuleDir
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CGO_ENABLED", "GOOS", "GOARCH", "GOFLAGS", "GOEXPERIMENT", "GOAMD64", "GOARM64":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s for %s/%s: %w\n%s", ErrGoBuild, pkg, goos, goarch, err, tail(stderr.String(), 4000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// binaryLayer writes the binaries as a sorted tar (root-owned, mode BinaryMode, mtime = date) and
// returns it as a gzip-compressed OCI layer.
func binaryLayer(bins []Binary, paths map[string]string, date time.Time) (v1.Layer, error) {
	names := make([]string, 0, len(bins))
	for _, b := range bins {
		names = append(names, b.Name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		data, err := os.ReadFile(paths[n])
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: n, Mode: BinaryMode, Size: int64(len(data)),
			ModTime: date.UTC(), Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
