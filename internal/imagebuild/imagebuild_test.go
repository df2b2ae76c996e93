package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

var (
	date  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	once  sync.Once
	first *Built
	onceE error
)

func moduleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	return dir
}

func options(t *testing.T) Options {
	dir := moduleDir(t)
	return Options{
		ModuleDir: dir, Binaries: DefaultBinaries(dir), Platforms: []string{"linux/amd64", "linux/arm64"},
		SourceDate: date, Source: DefaultSource, Revision: "0123456789abcdef", Version: "v0.0.0-test",
		WorkDir: t.TempDir(),
	}
}

// built builds the project's image once per test binary (both platforms).
func built(t *testing.T) *Built {
	t.Helper()
	o := options(t)
	o.WorkDir = ""
	once.Do(func() { first, onceE = Build(context.Background(), o) })
	if onceE != nil {
		t.Fatalf("build: %v", onceE)
	}
	return first
}

func digest(t *testing.T, b *Built) v1.Hash {
	t.Helper()
	d, err := b.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildIsReproducible builds the image a second time, in another work directory, and expects
// the same index digest.
func TestBuildIsReproducible(t *testing.T) {
	a := built(t)
	b, err := Build(context.Background(), options(t))
	if err != nil {
		t.Fatal(err)
	}
	if da, db := digest(t, a), digest(t, b); da != db {
		t.Fatalf("two builds of the same source differ: %s vs %s", da, db)
	}
	if !bytes.Equal(a.SBOM, b.SBOM) {
		t.Error("two builds of the same source have different SBOMs")
	}
}

// TestBuildDependsOnSourceDate is the twin: a different source date gives a different digest, so
// the reproducibility above is not an accident of a constant output.
func TestBuildDependsOnSourceDate(t *testing.T) {
	a := built(t)
	o := options(t)
	o.SourceDate = date.Add(time.Second)
	b, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, a) == digest(t, b) {
		t.Fatal("a different source date gave the same digest")
	}
}

// TestImageShape checks every platform's image: user, entrypoint, labels, created time, and a layer
// holding exactly the binaries, root-owned, mode 0555, statically linked for that architecture.
func TestImageShape(t *testing.T) {
	b := built(t)
	im, err := b.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index media type %q", im.MediaType)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := b.Index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != User || strings.Join(cf.Config.Entrypoint, " ") != "/manager" {
			t.Errorf("%s: user %q entrypoint %q", d.Platform, cf.Config.User, cf.Config.Entrypoint)
		}
		for k, want := range map[string]string{SourceLabel: DefaultSource, RevisionLabel: "0123456789abcdef", VersionLabel: "v0.0.0-test"} {
			if got := cf.Config.Labels[k]; got != want {
				t.Errorf("%s: label %s = %q, want %q", d.Platform, k, got, want)
			}
		}
		if !cf.Created.Equal(date) || cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: created %v os %s arch %s", d.Platform, cf.Created.Time, cf.OS, cf.Architecture)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, err %v", d.Platform, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		var names []string
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, "/"+h.Name)
			if h.Mode != BinaryMode || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(date) {
				t.Errorf("%s: %s mode %o uid %d gid %d mtime %v", d.Platform, h.Name, h.Mode, h.Uid, h.Gid, h.ModTime)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			checkStatic(t, d.Platform.Architecture, h.Name, data)
		}
		_ = rc.Close()
		if got, want := strings.Join(names, " "), binaryList(DefaultBinaries(moduleDir(t))); got != want {
			t.Errorf("%s: layer holds %q, want %q", d.Platform, got, want)
		}
	}
	sort.Strings(platforms)
	if strings.Join(platforms, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v", platforms)
	}
}

func checkStatic(t *testing.T, arch, name string, data []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s/%s is not ELF: %v", arch, name, err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		t.Errorf("%s/%s: machine %v, want %v", arch, name, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s/%s is dynamically linked (has PT_INTERP)", arch, name)
		}
	}
}

// TestBuildRefusals: bad options are refused with named errors before anything is compiled.
func TestBuildRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   error
	}{
		{"no binaries", func(o *Options) { o.Binaries = nil }, ErrNoBinaries},
		{"darwin", func(o *Options) { o.Platforms = []string{"darwin/arm64"} }, ErrBadPlatform},
		{"no arch", func(o *Options) { o.Platforms = []string{"linux"} }, ErrBadPlatform},
		{"no date", func(o *Options) { o.SourceDate = time.Time{} }, ErrBadSourceDate},
		{"broken package", func(o *Options) { o.Binaries = []Binary{{Name: "x", Package: "./does/not/exist"}} }, ErrGoBuild},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t)
			tc.mutate(&o)
			if _, err := Build(context.Background(), o); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func getJSON(t *testing.T, url string, into any) http.Header {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(into); err != nil {
		t.Fatal(err)
	}
	return resp.Header
}

// TestPushAttachesSBOMReferrer pushes to an in-process registry with the OCI 1.1 referrers API and
// finds the SBOM through it (filtered by artifactType), with the index as its subject.
func TestPushAttachesSBOMReferrer(t *testing.T) {
	b := built(t)
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	pushed, err := Push(context.Background(), b, reg.Host+"/connector-mcp", "test")
	if err != nil {
		t.Fatal(err)
	}
	if pushed.Digest != digest(t, b) || pushed.Ref != reg.Host+"/connector-mcp@"+pushed.Digest.String() {
		t.Fatalf("pushed %+v", pushed)
	}
	var idx v1.IndexManifest
	getJSON(t, "http://"+reg.Host+"/v2/connector-mcp/referrers/"+pushed.Digest.String()+"?artifactType="+url.QueryEscape(SBOMMediaType), &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != pushed.SBOMDigest || idx.Manifests[0].ArtifactType != SBOMMediaType {
		t.Fatalf("referrers of the index: %+v", idx.Manifests)
	}
	checkSBOM(t, reg.Host, pushed)
	// The tag points at the same index.
	tagged, err := remote.Index(mustRef(t, reg.Host+"/connector-mcp:test"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := tagged.Digest(); d != pushed.Digest {
		t.Errorf("tag points at %s, want %s", d, pushed.Digest)
	}
}

// TestPushSBOMTagFallback: on a registry without the referrers API the SBOM is still found, through
// the sha256-<hex> tag schema that go-containerregistry's Referrers reads.
func TestPushSBOMTagFallback(t *testing.T) {
	b := built(t)
	reg := ocitest.New(ocitest.Options{Referrers: false})
	defer reg.Close()
	pushed, err := Push(context.Background(), b, reg.Host+"/connector-mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	var fallback v1.IndexManifest
	getJSON(t, "http://"+reg.Host+"/v2/connector-mcp/manifests/sha256-"+pushed.Digest.Hex, &fallback)
	if len(fallback.Manifests) != 1 || fallback.Manifests[0].Digest != pushed.SBOMDigest {
		t.Fatalf("fallback tag index: %+v", fallback.Manifests)
	}
	checkSBOM(t, reg.Host, pushed)
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkSBOM(t *testing.T, host string, pushed *Pushed) {
	t.Helper()
	var m v1.Manifest
	getJSON(t, "http://"+host+"/v2/connector-mcp/manifests/"+pushed.SBOMDigest.String(), &m)
	if m.Subject == nil || m.Subject.Digest != pushed.Digest || len(m.Layers) != 1 {
		t.Fatalf("SBOM manifest %+v", m)
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	getJSON(t, "http://"+host+"/v2/connector-mcp/blobs/"+m.Layers[0].Digest.String(), &doc)
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	found := map[string]string{}
	for _, p := range doc.Packages {
		found[p.Name] = p.VersionInfo
	}
	if found["manager"] != "v0.0.0-test" || found["github.com/modelcontextprotocol/go-sdk"] != "v1.8.0" || !strings.HasPrefix(found["stdlib"], "go1.") {
		t.Errorf("SBOM packages lack the manager, go-sdk v1.8.0 or stdlib: manager=%q go-sdk=%q stdlib=%q",
			found["manager"], found["github.com/modelcontextprotocol/go-sdk"], found["stdlib"])
	}
}

// TestPushRefusesPlainHTTPElsewhere is the twin of the loopback pushes: go-containerregistry would
// talk plain HTTP to an RFC 1918 registry; Push refuses before any byte is sent.
func TestPushRefusesPlainHTTPElsewhere(t *testing.T) {
	b := built(t)
	for _, repo := range []string{"10.0.0.1:5000/connector-mcp", "192.168.1.10:5000/connector-mcp"} {
		if _, err := Push(context.Background(), b, repo, ""); !errors.Is(err, ErrPlainHTTPUnsafe) {
			t.Errorf("%s: err = %v, want ErrPlainHTTPUnsafe", repo, err)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "localhost:5000": true, "[::1]:5000": true, "127.1.2.3": true, "LOCALHOST": true,
		"10.0.0.1:5000": false, "ghcr.io": false, "localhost.evil.com": false, "192.168.1.1": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestDockerfileMatchesImage keeps the Dockerfile (the documented alternative) equal to what
// `make image` builds: the same binaries, built the same way, the same USER and ENTRYPOINT.
func TestDockerfileMatchesImage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(moduleDir(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	for _, want := range []string{
		"USER " + User + "\n",
		`ENTRYPOINT ["` + Entrypoint + `"]` + "\n",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"ENV CGO_ENABLED=0",
		SourceLabel, RevisionLabel, VersionLabel,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	for _, b := range []Binary{{Name: "manager", Package: "./cmd/manager"}, {Name: "gateway", Package: "./cmd/gateway"}} {
		build := `go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o /out/` + b.Name + " " + b.Package
		if !strings.Contains(df, build) {
			t.Errorf("Dockerfile does not build %s as make image does (%q)", b.Name, build)
		}
	}
	if got := dockerfileBinaries(df); strings.Join(got, ",") != "gateway,manager" {
		t.Errorf("Dockerfile builds %v, want gateway and manager (DefaultBinaries' candidates)", got)
	}
}

// dockerfileBinaries lists the /out/<name> binaries the Dockerfile builds, sorted.
func dockerfileBinaries(df string) []string {
	var names []string
	for _, f := range strings.Fields(df) {
		if n, ok := strings.CutPrefix(f, "/out/"); ok && n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// TestDockerfileDriftIsCaught is the twin: a Dockerfile with another user is told apart.
func TestDockerfileDriftIsCaught(t *testing.T) {
	if strings.Contains("USER 0:0\n", "USER "+User+"\n") {
		t.Fatal("the user check cannot tell root from 65532")
	}
	if got := dockerfileBinaries("go build -o /out/manager ./cmd/manager\n"); strings.Join(got, ",") == "gateway,manager" {
		t.Fatal("a Dockerfile without the gateway passes the binary check")
	}
}
