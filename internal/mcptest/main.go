package mcptest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverFlag is the first argument that turns a test binary into a stdio test server.
const serverFlag = "-mcptest-server"

// RunIfServer turns the running test binary into a test server when it was started by StdioArgv.
// Call it first thing in TestMain; it does not return in that case.
func RunIfServer() {
	if len(os.Args) > 1 && os.Args[1] == serverFlag {
		// syscall.Exit skips the race detector's exit delay (a second per server under -race).
		syscall.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// StdioArgv returns the argv that starts the test binary as a stdio test server with the given
// flags (see Main). The test package's TestMain must call RunIfServer.
func StdioArgv(flags ...string) []string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return append([]string{exe, serverFlag}, flags...)
}

// Main is the test server program (cmd/mcptest-server). Flags:
//
//	--http ADDR          serve Streamable HTTP on ADDR instead of stdio
//	--tls-cert FILE --tls-key FILE   with --http: serve HTTPS with this certificate and key
//	--era modern|legacy  modern: stateless 2026-07-28 (HTTP) / discover answered (stdio);
//	                     legacy: stateful 2025-11-25 only
//	--tools FILE         JSON array of tool descriptors (default: DefaultTools)
//	--generate N         serve N generated tools instead
//	--discover MODE      stdio: answer (default), ignore or exit on server/discover
//	--hostile MODE       serve with the raw engine misbehaving (Hostile* constants)
//	--raw                serve --tools byte for byte with the raw engine
//	--size N --delay D --page-size N --sse   parameters of the raw engine
//	--stderr N           write N bytes to stderr at start (stderr capture tests)
//	--change-after D     change tool "echo" after D (notifications/tools/list_changed)
//	--print-env          stdio: expose the environment as tool "env" (raw engine)
//	--conformance        serve the tools of the conformance suite's server scenarios
//	                     (NewConformanceServer)
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcptest-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		addr      = fs.String("http", "", "serve Streamable HTTP on this address")
		era       = fs.String("era", "modern", "modern or legacy")
		toolsFile = fs.String("tools", "", "JSON array of tool descriptors")
		generate  = fs.Int("generate", 0, "serve N generated tools")
		discover  = fs.String("discover", "answer", "stdio: answer, ignore or exit on server/discover")
		hostile   = fs.String("hostile", "", "raw engine misbehaviour")
		raw       = fs.Bool("raw", false, "serve tools byte for byte with the raw engine")
		size      = fs.Int("size", 1<<20, "size parameter of hostile modes")
		delay     = fs.Duration("delay", 10*time.Second, "delay of the slow mode")
		pageSize  = fs.Int("page-size", 0, "raw engine page size")
		sse       = fs.Bool("sse", false, "raw engine: answer HTTP with SSE")
		noise     = fs.Int("stderr", 0, "write N bytes to stderr at start")
		printEnv  = fs.Bool("print-env", false, "raw engine: serve tool 'env' whose description is the environment")
		conform   = fs.Bool("conformance", false, "serve the tools of the conformance suite's server scenarios")
		change    = fs.Duration("change-after", 0, "go-sdk server: change tool 'echo' after this long (list_changed)")
		tlsCert   = fs.String("tls-cert", "", "with --http: PEM certificate (chain) to serve HTTPS with")
		tlsKey    = fs.String("tls-key", "", "with --http: PEM private key of --tls-cert")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*tlsCert == "") != (*tlsKey == "") || (*tlsCert != "" && *addr == "") {
		fmt.Fprintln(stderr, "mcptest-server: --tls-cert and --tls-key go together, with --http")
		return 2
	}
	if *noise > 0 {
		fmt.Fprintf(stderr, "%0*d", *noise, 0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	useRaw := *raw || *hostile != "" || *printEnv
	var handler http.Handler
	var srv *mcp.Server
	if useRaw {
		r := &Raw{Era: Era(*era), Hostile: *hostile, Size: *size, Delay: *delay, PageSize: *pageSize, SSE: *sse, Discover: *discover}
		if *toolsFile != "" {
			tools, err := LoadRawTools(*toolsFile)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			r.Tools = tools
		}
		if *printEnv {
			env, _ := json.Marshal(os.Environ())
			desc, _ := json.Marshal(string(env))
			r.Tools = []json.RawMessage{json.RawMessage(`{"name":"env","description":` + string(desc) + `,"inputSchema":{"type":"object"}}`)}
		}
		if *addr == "" {
			return exitCode(r.ServeStdio(ctx, stdin, stdout))
		}
		handler = r
	}
	if handler == nil {
		tools := DefaultTools()
		switch {
		case *generate > 0:
			tools = GenerateTools(*generate)
		case *toolsFile != "":
			t, err := LoadTools(*toolsFile)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			tools = t
		}
		srv = NewServer("mcptest", tools)
		if *conform {
			srv = NewConformanceServer()
		}
		if *change > 0 {
			time.AfterFunc(*change, func() {
				SetTool(srv, &mcp.Tool{Name: "echo", Description: "Echo, changed at run time.", InputSchema: json.RawMessage(`{"type":"object"}`)})
			})
		}
		if *addr != "" {
			handler = HTTPHandler(srv, Era(*era))
		}
	}
	if *addr != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		scheme := "http"
		if *tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
			if err != nil {
				fmt.Fprintln(stderr, "mcptest-server:", err)
				return 1
			}
			ln, scheme = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https"
		}
		fmt.Fprintf(stderr, "mcptest-server: serving %s MCP on %s://%s/mcp\n", *era, scheme, ln.Addr())
		hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			hs.Close()
		}()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return 1
		}
		return 0
	}
	t := &stdioServerTransport{in: stdin, out: stdout, legacyOnly: Era(*era) == Legacy, discover: *discover}
	return exitCode(srv.Run(ctx, t))
}

func exitCode(err error) int {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		return 1
	}
	return 0
}

// stdioServerTransport is the SDK's IOTransport with test behaviour around server/discover.
type stdioServerTransport struct {
	in         io.Reader
	out        io.Writer
	legacyOnly bool
	discover   string
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func (t *stdioServerTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	inner, err := (&mcp.IOTransport{Reader: io.NopCloser(t.in), Writer: nopWriteCloser{t.out}}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &discoverConn{Connection: inner, mode: t.discover}, nil
}

// SupportsProtocolVersion makes a legacy-only server refuse 2026-07-28 with -32022.
func (t *stdioServerTransport) SupportsProtocolVersion(v string) bool {
	return !t.legacyOnly || v < "2026-07-28"
}

// discoverConn ignores or exits on server/discover, as go-sdk #1177's servers do.
type discoverConn struct {
	mcp.Connection
	mode string
}

func (c *discoverConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "server/discover" {
			switch c.mode {
			case "ignore":
				continue
			case "exit":
				syscall.Exit(0)
			}
		}
		return msg, err
	}
}
