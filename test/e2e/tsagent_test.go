//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/b10x/connector-mcp/internal/imagebuild"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// tsAgentDir is where the TypeScript agent's image holds the SDK (node_modules) and the script.
const tsAgentDir = "/ts"

// buildTSAgentImage builds the TypeScript SDK agent's image: this machine's node binary with the
// shared libraries it links (as ldd lists them), the SDK version hack/ts-sdk.sh pins (from npm,
// cached) and mcptest.TypeScriptAgent, pushed to the node's registry. Nothing is pulled: every
// file comes from this machine.
func (e *env) buildTSAgentImage(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "bash", filepath.Join(e.root, "hack", "ts-sdk.sh")).Output()
	if err != nil {
		t.Fatalf("hack/ts-sdk.sh (needs npm): %v", err)
	}
	modules := strings.TrimSpace(string(out))
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the TypeScript agent")
	}
	if node, err = filepath.EvalSymlinks(node); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"/usr/bin/node": node} // image path -> path on this machine
	ldd, err := exec.CommandContext(t.Context(), "ldd", node).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", node, err)
	}
	for _, lib := range regexp.MustCompile(`(?m)(/\S+\.so[.0-9]*)\s+\(0x`).FindAllStringSubmatch(string(ldd), -1) {
		files[lib[1]] = lib[1]
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	date := time.Unix(315532800, 0).UTC()
	dirs := map[string]bool{}
	addDirs := func(p string) {
		var parents []string
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: date}))
		}
	}
	addFile := func(imagePath, hostPath string, mode int64) {
		b, err := os.ReadFile(hostPath)
		if err != nil {
			t.Fatal(err)
		}
		addDirs(imagePath)
		must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(imagePath, "/"), Mode: mode, Size: int64(len(b)), ModTime: date}))
		_, err = tw.Write(b)
		must(t, err)
	}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		addFile(p, files[p], 0o755)
	}
	must(t, filepath.WalkDir(modules, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(modules), p)
		imagePath := filepath.Join(tsAgentDir, rel)
		switch {
		case d.IsDir():
			addDirs(filepath.Join(imagePath, "x"))
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			addDirs(imagePath)
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(imagePath, "/"), Linkname: target, Mode: 0o777, ModTime: date})
		case d.Type().IsRegular():
			addFile(imagePath, p, 0o644)
		}
		return nil
	}))
	script := []byte(mcptest.TypeScriptAgent)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(tsAgentDir, "/") + "/agent.mjs", Mode: 0o644, Size: int64(len(script)), ModTime: date}))
	_, err = tw.Write(script)
	must(t, err)
	must(t, tw.Close())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	must(t, err)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	must(t, err)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	must(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.User = imagebuild.User
	cf.Config.Entrypoint = []string{"/usr/bin/node"}
	cf.Config.WorkingDir = tsAgentDir
	img, err = mutate.ConfigFile(img, cf)
	must(t, err)
	ref, err := name.ParseReference(e.node.Registry+"/e2e/ts-agent:e2e", name.Insecure)
	must(t, err)
	must(t, remote.Write(ref, img, remote.WithContext(t.Context())))
	digest, err := img.Digest()
	must(t, err)
	return e.node.Registry + "/e2e/ts-agent@" + digest.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tsAgentThroughTheService: the TypeScript SDK's Client, in an agent Pod wired as the go-sdk
// agent's (projected token, the gateway's CA bundle, here through NODE_EXTRA_CA_CERTS, the
// Service's ClusterIP), lists the reviewed operations and calls one through the gateway.
func (e *env) tsAgentThroughTheService(t *testing.T) {
	image := e.buildTSAgentImage(t)
	pod := e.agentPod(t, "ts-agent", "connector-mcp")
	c := &pod.Spec.Containers[0]
	c.Image = image
	c.Args = []string{tsAgentDir + "/agent.mjs", c.Args[1], "@/var/run/secrets/connector-mcp/token", e.act.ops["get_forecast"], `{"city":"Bergen"}`}
	c.Env = []corev1.EnvVar{{Name: "NODE_EXTRA_CA_CERTS", Value: "/etc/connector-mcp-ca/ca.crt"}}
	e.createPod(t, pod)
	logs := e.podLogs(t, "ts-agent", 3*time.Minute)
	var got struct {
		Tools  []struct{ Name string } `json:"tools"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(logs), &got); err != nil {
		t.Fatalf("ts-agent printed %q: %v", logs, err)
	}
	if got.Error != "" || got.Result.IsError || len(got.Result.Content) == 0 || !strings.Contains(got.Result.Content[0].Text, "Bergen") {
		t.Errorf("TypeScript agent: %s", logs)
	}
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := e.reviewedNames(); !slices.Equal(names, want) {
		t.Errorf("TypeScript agent listed %v, want exactly %v", names, want)
	}
}
