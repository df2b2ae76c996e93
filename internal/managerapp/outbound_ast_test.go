package managerapp

import (
	"bufio"
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/b10x/connector-mcp"

// constructorPackages may call egress's client constructors: egress builds the guarded
// transport and dialer, and k8sbinding is where the binaries' clients get the cluster deny list
// (NewClient, Binder).
var constructorPackages = map[string]bool{
	modulePath + "/egress":              true,
	modulePath + "/internal/k8sbinding": true,
}

// outboundAllowList names every construction (package, enclosing function, what) that a
// binary may make outside the constructor, each with its reason. The entries inside egress are
// the constructor itself.
var outboundAllowList = map[string]string{
	"egress NewHTTPClient http.Client":                                           "the constructor: the client around egress's guarded transport",
	"egress NewTransport http.Transport":                                         "the constructor: the one http.Transport, dialing only through the guarded Dialer (Policy.Deny at dial time)",
	"egress NewTransport http.Client":                                            "the constructor: the port's internal client over that transport",
	"egress Transport.HTTPClient http.Client":                                    "an adapter whose RoundTripper is the port itself; it dials nothing of its own",
	"egress Dialer.DialContext net.Dialer":                                       "the guarded dialer: its Control is IPPolicy.Control, with the deny list read for this dial",
	"mcpclient boundClient http.DefaultTransport":                                "mcpctl's workstation path when no client is given; the manager and the gateway always pass the client of a k8sbinding.Binder port, whose Transport is set",
	"mcpclient boundClient http.Client":                                          "a copy of the given client (the binaries always give the Binder port's), or mcpctl's own default when none is given",
	"mcpclient/oauth refusalRecorder.wrap http.DefaultTransport":                 "a fallback for a client without a Transport (mcpctl login); the producer's client comes from k8sbinding.NewClient and has one",
	"mcpclient/oauth registrationCapture.wrap http.DefaultTransport":             "as refusalRecorder.wrap",
	"internal/ociregistry Client.repository http.DefaultClient":                  "mcpctl pack pull/push on a workstation (no HTTPClient); the binaries set HTTPClient from k8sbinding.NewClient (appoptions.RegistryHTTPClient)",
	"internal/ociregistry contentCheckTransport.RoundTrip http.DefaultTransport": "only for a caller's client without a Transport (mcpctl); the binaries' registry client has one",
}

// typeNames are the guarded names that are types: only their construction counts (a composite
// literal, new(T) or a zero-value var), not a mention in a signature.
var typeNames = map[string]bool{"Client": true, "Transport": true, "Dialer": true}

// guarded are the net/http and net names whose construction or use makes an outbound client.
var guarded = map[string]map[string]bool{
	"net/http": {"Client": true, "Transport": true, "DefaultClient": true, "DefaultTransport": true,
		"Get": true, "Head": true, "Post": true, "PostForm": true},
	"net":                  {"Dialer": true, "Dial": true, "DialTimeout": true},
	modulePath + "/egress": {"NewHTTPClient": true, "NewTransport": true, "NewBindingTransport": true, "NewDialer": true, "Dialer": true},
}

// TestEveryOutboundClientHasTheDenyList reads the non-test Go files of
// every package of this module that the manager and the gateway link (go list -deps
// ./cmd/manager ./cmd/gateway) and fails on each http.Client, http.Transport or net.Dialer
// built (or http.DefaultClient / DefaultTransport / http.Get used), and each call of egress's
// client constructors, outside internal/k8sbinding and the allow-list above: every outbound client
// of the binaries is built by k8sbinding.NewClient or k8sbinding.Binder, which require the
// cluster deny list. An allow-list entry that matches nothing fails too (it would hide a
// future construction).
func TestEveryOutboundClientHasTheDenyList(t *testing.T) {
	found := outboundConstructions(t)
	seen := map[string]bool{}
	for _, f := range found {
		key := f.key
		if constructorPackages[modulePath+"/"+f.pkg] && strings.HasPrefix(f.what, "egress.") {
			continue // k8sbinding (or egress) calling egress's constructors: the constructor itself
		}
		if _, ok := outboundAllowList[key]; ok {
			seen[key] = true
			continue
		}
		t.Errorf("%s: %s built outside k8sbinding.NewClient / Binder (no cluster deny list); build it there or add %q to outboundAllowList with a reason", f.pos, f.what, key)
	}
	for key := range outboundAllowList {
		if !seen[key] {
			t.Errorf("allow-list entry %q matches no construction: remove it", key)
		}
	}
}

// Must-fail twin: the scanner sees a construction outside the constructor.
func TestOutboundScannerFindsAConstruction(t *testing.T) {
	src := `package x
import (
	h "net/http"
	"net"
	"github.com/b10x/connector-mcp/egress"
)
func f() {
	_ = &h.Client{}
	_ = h.Transport{}
	_ = new(net.Dialer)
	var c h.Client // a zero-value client is one too
	_ = c
	var _ func(*h.Client) *h.Transport // a mention is not a construction
	_, _ = h.Get("https://example.com")
	_, _ = egress.NewHTTPClient(egress.Policy{})
}`
	got := scanFile(t, "x", "x.go", []byte(src))
	var keys []string
	for _, f := range got {
		keys = append(keys, f.key)
	}
	sort.Strings(keys)
	want := []string{"x f egress.NewHTTPClient", "x f http.Client", "x f http.Client", "x f http.Get", "x f http.Transport", "x f net.Dialer"}
	if strings.Join(keys, ";") != strings.Join(want, ";") {
		t.Fatalf("found %v, want %v", keys, want)
	}
}

type construction struct {
	pkg, what, key string
	pos            token.Position
}

func outboundConstructions(t *testing.T) []construction {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", "./cmd/manager", "./cmd/gateway")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var all []construction
	pkgs := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], modulePath+"/") {
			continue
		}
		pkgs++
		rel := strings.TrimPrefix(parts[0], modulePath+"/")
		for _, name := range strings.Split(parts[2], ",") {
			if name == "" {
				continue
			}
			all = append(all, scanFile(t, rel, filepath.Join(parts[1], name), nil)...)
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list found only %d packages of the module: the scan would prove nothing", pkgs)
	}
	return all
}

// scanFile returns the guarded constructions and uses in one file; src nil reads path.
func scanFile(t *testing.T, pkg, path string, src []byte) []construction {
	t.Helper()
	fset := token.NewFileSet()
	var s any
	if src != nil {
		s = src
	}
	f, err := parser.ParseFile(fset, path, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var out []construction
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		fn := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				fn = id.Name + "." + fn
			}
		}
		built := map[ast.Expr]bool{} // type expressions in construction position
		ast.Inspect(fd, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				built[x.Type] = true
			case *ast.CallExpr:
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 {
					built[x.Args[0]] = true
				}
			case *ast.ValueSpec:
				if x.Type != nil && len(x.Values) == 0 {
					built[x.Type] = true
				}
			}
			return true
		})
		ast.Inspect(fd, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := imports[id.Name]
			if !ok || !guarded[p][sel.Sel.Name] || (typeNames[sel.Sel.Name] && !built[sel]) {
				return true
			}
			short := p[strings.LastIndex(p, "/")+1:]
			what := short + "." + sel.Sel.Name
			out = append(out, construction{pkg: pkg, what: what, key: pkg + " " + fn + " " + what, pos: fset.Position(sel.Pos())})
			return true
		})
	}
	return out
}
