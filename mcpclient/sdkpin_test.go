package mcpclient

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sdkPin is hack/go-sdk.pin: the go-sdk release this module is built against.
type sdkPin struct {
	Module, Version, Time, H1, GoMod, Revision string
}

func readSDKPin(t *testing.T, path string) sdkPin {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok || fields[k] != "" {
			t.Fatalf("%s: malformed or repeated line %q", path, line)
		}
		fields[k] = strings.TrimSpace(v)
	}
	p := sdkPin{Module: fields["module"], Version: fields["version"], Time: fields["time"], H1: fields["h1"], GoMod: fields["gomod"], Revision: fields["revision"]}
	if p.Module == "" || p.Version == "" || p.Time == "" || p.H1 == "" || p.GoMod == "" || p.Revision == "" {
		t.Fatalf("%s: every one of module, version, time, h1, gomod, revision is required: %+v", path, p)
	}
	if p.Revision != "unknown" && !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(p.Revision) {
		t.Fatalf("%s: revision %q is neither a full git commit hash nor \"unknown\"", path, p.Revision)
	}
	return p
}

// hash1 is go.sum's "h1:" hash of a module tree (golang.org/x/mod/sumdb/dirhash.Hash1): SHA-256
// over the sorted lines "<sha256 hex>  <name>\n" of its files, named module@version/path.
func hash1(names []string, open func(string) (io.ReadCloser, error)) (string, error) {
	names = slices.Clone(names)
	slices.Sort(names)
	sum := sha256.New()
	for _, name := range names {
		if strings.Contains(name, "\n") {
			return "", fmt.Errorf("file name with a newline: %q", name)
		}
		r, err := open(name)
		if err != nil {
			return "", err
		}
		f := sha256.New()
		_, err = io.Copy(f, r)
		r.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(sum, "%x  %s\n", f.Sum(nil), name)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(sum.Sum(nil)), nil
}

func zipHash1(path string) (string, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return "", err
	}
	defer z.Close()
	files := map[string]*zip.File{}
	var names []string
	for _, f := range z.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if files[f.Name] != nil {
			return "", fmt.Errorf("duplicate zip entry %q", f.Name)
		}
		files[f.Name] = f
		names = append(names, f.Name)
	}
	return hash1(names, func(n string) (io.ReadCloser, error) { return files[n].Open() })
}

func dirHash1(dir, prefix string) (string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, prefix+"/"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", err
	}
	return hash1(names, func(n string) (io.ReadCloser, error) {
		return os.Open(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(n, prefix+"/"))))
	})
}

// TestGoSDKPin holds the shared client release to the exact version and source recorded in
// hack/go-sdk.pin: go.mod requires that version and the build selects it unreplaced, go.sum and
// the module cache carry its h1 hash,
// the module cache's zip and extracted tree (what go build compiles) hash to it, the proxy's
// .info carries its commit time and, when the proxy records the origin, the pinned git revision
// (refs/tags/VERSION). It reads the module cache only (GOPROXY=off): CI runs "go mod download"
// first.
func TestGoSDKPin(t *testing.T) {
	root := filepath.Join("..")
	pin := readSDKPin(t, filepath.Join(root, "hack", "go-sdk.pin"))

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	req := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(pin.Module) + `\s+(\S+)`).FindSubmatch(gomod)
	if req == nil || string(req[1]) != pin.Version {
		t.Fatalf("go.mod requires %s %s, hack/go-sdk.pin pins %s: update both together", pin.Module, req, pin.Version)
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{pin.Module + " " + pin.Version + " " + pin.H1, pin.Module + " " + pin.Version + "/go.mod " + pin.GoMod} {
		if !slices.Contains(strings.Split(string(gosum), "\n"), line) {
			t.Errorf("go.sum lacks the pinned line %q", line)
		}
	}

	// The module the build selects (test binaries record no dependency build info).
	goJSON := func(v any, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s (offline, from the module cache; run \"go mod download\" first): %v\n%s", strings.Join(args, " "), err, out)
		}
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
	}
	var sel struct {
		Version, Dir string
		Replace      *struct{ Path, Version string }
	}
	goJSON(&sel, "list", "-m", "-json", pin.Module)
	if sel.Version != pin.Version || sel.Replace != nil {
		t.Errorf("the build selects %s %s (replace %+v), pinned %s", pin.Module, sel.Version, sel.Replace, pin.Version)
	}

	var dl struct {
		Info, Zip, Dir, Sum, GoModSum, Error string
	}
	goJSON(&dl, "mod", "download", "-json", pin.Module+"@"+pin.Version)
	if dl.Error != "" || dl.Dir != sel.Dir {
		t.Fatalf("go mod download: %q; module directory %s, the build's %s", dl.Error, dl.Dir, sel.Dir)
	}
	if dl.Sum != pin.H1 || dl.GoModSum != pin.GoMod {
		t.Errorf("module cache sums %s %s, pinned %s %s", dl.Sum, dl.GoModSum, pin.H1, pin.GoMod)
	}
	if h, err := zipHash1(dl.Zip); err != nil || h != pin.H1 {
		t.Errorf("the downloaded zip hashes to %s (%v), pinned %s: the module's source no longer matches", h, err, pin.H1)
	}
	if h, err := dirHash1(dl.Dir, pin.Module+"@"+pin.Version); err != nil || h != pin.H1 {
		t.Errorf("the extracted module %s hashes to %s (%v), pinned %s: the source go build compiles was changed", dl.Dir, h, err, pin.H1)
	}

	b, err := os.ReadFile(dl.Info)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Version, Time string
		Origin        *sdkOrigin
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("%s: %v", dl.Info, err)
	}
	if info.Version != pin.Version || info.Time != pin.Time {
		t.Errorf("%s: version %s time %s, pinned %s %s", dl.Info, info.Version, info.Time, pin.Version, pin.Time)
	}
	if err := checkOrigin(pin, info.Origin); err != nil {
		t.Error(err)
	} else if info.Origin == nil || info.Origin.Hash == "" {
		// Not a failure: this proxy does not record origins. The h1 checks above bind the source.
		t.Logf("%s records no Origin: revision %s not checked against the proxy; the source is bound by %s", dl.Info, pin.Revision, pin.H1)
	}
}

// sdkOrigin is the Origin of a module proxy's .info file.
type sdkOrigin struct{ VCS, URL, Hash, Ref string }

// checkOrigin compares the revision the proxy recorded (nil or no hash: none) with the pin.
func checkOrigin(pin sdkPin, o *sdkOrigin) error {
	switch {
	case o == nil || o.Hash == "":
		return nil
	case pin.Revision == "unknown":
		return fmt.Errorf("the module proxy records %s %s at git revision %s (%s): write \"revision %s\" into hack/go-sdk.pin", pin.Module, pin.Version, o.Hash, o.Ref, o.Hash)
	case o.Hash != pin.Revision:
		return fmt.Errorf("the module proxy records %s %s at git revision %s, pinned %s: the release was re-tagged or the pin is wrong", pin.Module, pin.Version, o.Hash, pin.Revision)
	case o.VCS != "git" || (o.Ref != "" && o.Ref != "refs/tags/"+pin.Version):
		return fmt.Errorf("the module proxy records origin %s %s, want git refs/tags/%s", o.VCS, o.Ref, pin.Version)
	}
	return nil
}

func TestCheckOrigin(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	pinned := sdkPin{Module: "m", Version: "v1.8.0", Revision: rev}
	unknown := sdkPin{Module: "m", Version: "v1.8.0", Revision: "unknown"}
	tag := &sdkOrigin{VCS: "git", Hash: rev, Ref: "refs/tags/v1.8.0"}
	for _, c := range []struct {
		name string
		pin  sdkPin
		o    *sdkOrigin
		ok   bool
	}{
		{"no origin", pinned, nil, true},
		{"origin without hash", unknown, &sdkOrigin{VCS: "git"}, true},
		{"the pinned revision", pinned, tag, true},
		{"pin unknown but recorded", unknown, tag, false},
		{"another revision", pinned, &sdkOrigin{VCS: "git", Hash: "f" + rev[1:], Ref: "refs/tags/v1.8.0"}, false},
		{"another ref", pinned, &sdkOrigin{VCS: "git", Hash: rev, Ref: "refs/heads/main"}, false},
	} {
		if err := checkOrigin(c.pin, c.o); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// The must-fail twins of TestGoSDKPin's hashes: one changed byte, one added file, one renamed
// file each change the h1 hash.
func TestHash1DetectsChangedSource(t *testing.T) {
	files := map[string]string{"m@v1/a.go": "package a\n", "m@v1/go.mod": "module m\n"}
	names := func(m map[string]string) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		return out
	}
	h := func(m map[string]string) string {
		s, err := hash1(names(m), func(n string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(m[n])), nil })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := h(files)
	for name, edit := range map[string]func(map[string]string){
		"changed byte": func(m map[string]string) { m["m@v1/a.go"] = "package b\n" },
		"added file":   func(m map[string]string) { m["m@v1/b.go"] = "package a\n" },
		"renamed file": func(m map[string]string) { m["m@v1/c.go"] = m["m@v1/a.go"]; delete(m, "m@v1/a.go") },
	} {
		m := map[string]string{}
		for k, v := range files {
			m[k] = v
		}
		edit(m)
		if h(m) == base {
			t.Errorf("%s: same hash", name)
		}
	}
	// The algorithm itself is held by TestGoSDKPin: go.sum's hash of the real module, recomputed.
}
