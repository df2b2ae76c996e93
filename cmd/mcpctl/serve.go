package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/admission"
	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/drift"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
)

func init() { register(newServeCmd) }

// Values of --on-drift.
const (
	onDriftRefuse        = "refuse"
	onDriftServeReviewed = "serve-reviewed"
)

// Audit outcomes other than a refusal name.
const (
	outcomeOK         = "ok"
	outcomeToolError  = "tool_error"
	outcomeCallFailed = "call_failed"
	// outcomeUnrepresentable: the upstream result does not decode as an MCP CallToolResult (an
	// unknown content type): the agent gets an error result instead.
	outcomeUnrepresentable = "result_not_representable"
)

// serveFlags are the flags of "mcpctl serve" besides the upstream's serverFlags.
type serveFlags struct {
	listen     string
	profile    string
	pack       string
	service    string
	onDrift    string
	auditFile  string
	notExposed []string
	rf         registryFlags
	pf         provenanceFlags
	vf         verifyFlags
}

func newServeCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve (--profile FILE | --pack REPO@sha256:DIGEST [verify flags]) (--url URL | -- CMD ARGS...)",
		Short: "Serve only the reviewed tools of an MCP server to a local agent (stdio, or Streamable HTTP on loopback)",
		Long: `serve is a local MCP server that an agent starts instead of the upstream server. On start it
connects to the upstream, freezes its tools and admits the intersection with the reviewed profile
(--profile FILE, or --pack REPO@sha256:DIGEST verified with the flags of "pack verify"). Only
admitted tools are served, under their reviewed names, titles and descriptions, with annotations
derived from the reviewed effect; the server's own prose and annotations never reach the agent.

If the live server differs from the profile, serve prints the classified diff on stderr and exits 4;
with --on-drift=serve-reviewed it serves only the unchanged tools. A tool-list change during the
run withdraws every tool it changed or removed (refused live_drift); nothing new ever appears.
One audit line per call goes to stderr or --audit-file (user, tool, digests, outcome, duration;
never arguments or results).`,
		Args: cobra.ArbitraryArgs,
	}
	var f serveFlags
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "", "serve Streamable HTTP on this loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT) instead of stdio")
	fs.StringVar(&f.profile, "profile", "", "reviewed profile document (YAML or JSON)")
	fs.StringVar(&f.pack, "pack", "", "profile pack REPO@sha256:DIGEST, verified like \"pack verify\" before use")
	fs.StringVar(&f.service, "service", "", "service ref of the profile to serve when the pack holds several")
	fs.StringVar(&f.onDrift, "on-drift", onDriftRefuse, "refuse (exit 4) or serve-reviewed (serve only the tools that did not change)")
	fs.StringVar(&f.auditFile, "audit-file", "", "append the audit lines to this file instead of stderr")
	fs.StringArrayVar(&f.notExposed, "not-exposed", nil, "operation ref of the profile not to serve (repeatable)")
	f.rf.registerRegistry(fs) // the egress flags of the server flags apply to the registry too
	f.pf.register(fs, false)
	f.vf.register(fs)
	sf := newServerFlags(fs)
	sf.watchToolList = true
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		return serve(cmd.Context(), env, &f, sf, cmd, args)
	})
	return cmd
}

// checkLoopbackListen refuses a --listen address that is not a loopback IP or "localhost".
func checkLoopbackListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--listen %q: want HOST:PORT on loopback", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usagef("--listen %q: only loopback addresses are served (127.0.0.1, ::1, localhost)", addr)
}

// loadAuthority reads the profile document of --profile, or verifies and pulls --pack.
func loadAuthority(ctx context.Context, env *cliEnv, f *serveFlags) (*apiv1.ProfileDocument, error) {
	switch {
	case f.profile != "" && f.pack != "":
		return nil, usagef("give either --profile or --pack, not both")
	case f.profile != "":
		b, err := readBounded(f.profile, ocipack.MaxProfileSize)
		if err != nil {
			return nil, err
		}
		return ocipack.DecodeProfile(b)
	case f.pack != "":
		_, p, err := verifyPack(ctx, env, &f.rf, &f.pf, &f.vf, f.pack)
		if err != nil {
			return nil, err
		}
		return pickProfile(p, f.service)
	default:
		return nil, usagef("name the reviewed profile: --profile FILE or --pack REPO@sha256:DIGEST")
	}
}

// pickProfile returns the profile of service (or the only one) of a verified pack.
func pickProfile(p *ociregistry.Pack, service string) (*apiv1.ProfileDocument, error) {
	if service == "" {
		if len(p.Profiles) != 1 {
			return nil, usagef("the pack holds %d profiles: name one with --service", len(p.Profiles))
		}
		return p.Profiles[0], nil
	}
	for _, d := range p.Profiles {
		if d.Service.Ref == service {
			return d, nil
		}
	}
	return nil, usagef("the pack holds no profile of service %q", service)
}

func serve(ctx context.Context, env *cliEnv, f *serveFlags, sf *serverFlags, cmd *cobra.Command, args []string) error {
	f.rf.egress = sf.egress
	if f.onDrift != onDriftRefuse && f.onDrift != onDriftServeReviewed {
		return usagef("--on-drift: refuse or serve-reviewed")
	}
	if f.listen != "" {
		if err := checkLoopbackListen(f.listen); err != nil {
			return err
		}
	}
	doc, err := loadAuthority(ctx, env, f)
	if err != nil {
		return err
	}
	audit := env.stderr
	if f.auditFile != "" {
		af, err := os.OpenFile(f.auditFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("--audit-file: %w", err)
		}
		defer af.Close()
		audit = af
	}
	sess, err := sf.connect(ctx, env, cmd, args)
	if err != nil {
		return err
	}
	defer sess.Close()
	live, err := sess.ListTools(ctx)
	if err != nil {
		return err
	}
	set, err := admission.Admit(live, admission.Authority{Profile: doc, NotExposed: f.notExposed})
	if err != nil {
		return err
	}
	if !set.Complete() {
		if set.Drifted() {
			fmt.Fprint(env.stderr, formatReport(set.Report()))
		}
		fmt.Fprint(env.stderr, formatRefused(set.Refused()))
		if f.onDrift == onDriftRefuse {
			if set.Drifted() {
				return &driftError{msg: "live server differs from the reviewed profile: nothing served (--on-drift=serve-reviewed serves the unchanged tools)"}
			}
			for _, r := range set.Refused() {
				if r.Refusal != admission.RefusalNotExposed {
					return &admission.Error{Name: r.Refusal, Tool: r.Tool, Err: admission.ErrNotAdmitted}
				}
			}
		}
	}
	if len(set.Tools()) == 0 {
		return &admission.Error{Name: admission.RefusalNotAdmitted, Err: fmt.Errorf("%w: no tool to serve", admission.ErrNotAdmitted)}
	}
	p := &proxy{env: env, set: set, up: sess, audit: audit, user: localUser(env)}
	srv, err := p.server()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go p.watch(runCtx, sess)
	fmt.Fprintf(env.stderr, "serving %d reviewed tool(s) of snapshot %s (profile %s)\n", len(set.Tools()), set.SnapshotDigest(), set.ProfileDigest())
	if f.listen == "" {
		t := &mcp.IOTransport{Reader: io.NopCloser(env.stdin), Writer: nopWriteCloser{env.stdout}}
		err := srv.Run(runCtx, t)
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		return err
	}
	return serveHTTP(runCtx, env, f.listen, srv)
}

// serveHTTP serves srv as a stateless Streamable HTTP endpoint at /mcp on addr until ctx ends.
func serveHTTP(ctx context.Context, env *cliEnv, addr string, srv *mcp.Server) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(env.stderr, "listening on http://%s/mcp\n", ln.Addr())
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err = hs.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// localUser names the local user for the audit lines.
func localUser(env *cliEnv) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := env.getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// proxy serves an admitted set over one upstream session.
type proxy struct {
	env   *cliEnv
	set   *admission.Set
	up    admission.Upstream
	audit io.Writer
	user  string

	// relist is held for writing while a tool-list change is being observed: calls wait for it,
	// so a call after the notification arrived never reaches a tool that changed.
	relist sync.RWMutex
	logMu  sync.Mutex
}

// server builds the local MCP server: one tool per admitted tool, reviewed facts only.
func (p *proxy) server() (*mcp.Server, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpctl-serve", Version: cliVersion()},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	// Tools only: go-sdk would answer prompts/list and resources/list with empty lists although
	// no such capability is declared; they are refused as method not found, as the gateway does
	// (go-sdk replaces the message of a -32601 with its own "method not found: METHOD").
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			for _, f := range []string{"prompts", "resources", "completion"} {
				if strings.HasPrefix(method, f+"/") {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "refused: " + f}
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, t := range p.set.Tools() {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema["type"] != "object" {
			// The SDK serves only object schemas; an MCP input schema is one.
			return nil, &admission.Error{Name: admission.RefusalInvalidSchema, Tool: t.Name, Err: admission.ErrNotAdmitted}
		}
		h := t.Hints()
		destructive := h.Destructive
		tool := &mcp.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{Title: t.Title, ReadOnlyHint: h.ReadOnly, DestructiveHint: &destructive},
		}
		name := t.Name
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return p.call(ctx, name, req.Params.Arguments), nil
		})
	}
	return srv, nil
}

// auditLine is one audit record: never arguments or results.
type auditLine struct {
	Time       string `json:"time"`
	User       string `json:"user"`
	Tool       string `json:"tool"`
	RemoteName string `json:"remoteName,omitempty"`
	Snapshot   string `json:"snapshot"`
	Profile    string `json:"profile"`
	Outcome    string `json:"outcome"`
	DurationMS int64  `json:"durationMs"`
}

// call runs one call through the admitted set and maps the outcome to a result for the agent.
func (p *proxy) call(ctx context.Context, name string, args json.RawMessage) *mcp.CallToolResult {
	start := time.Now()
	p.relist.RLock()
	raw, err := p.set.Call(ctx, p.up, name, args)
	p.relist.RUnlock()
	outcome := outcomeOK
	var res *mcp.CallToolResult
	var te *mcpclient.ToolError
	switch {
	case err == nil:
		res = &mcp.CallToolResult{}
		if json.Unmarshal(raw, res) != nil {
			outcome, res = outcomeUnrepresentable, refusedResult(outcomeUnrepresentable)
		}
	case errors.As(err, &te):
		outcome = outcomeToolError
		res = &mcp.CallToolResult{}
		if json.Unmarshal(te.Result, res) != nil {
			outcome, res = outcomeUnrepresentable, refusedResult(outcomeUnrepresentable)
		}
		res.IsError = true
	case refusal.Name(err) != "":
		outcome = refusal.Name(err)
		res = refusedResult(outcome)
	default:
		outcome = outcomeCallFailed
		res = refusedResult(outcomeCallFailed)
	}
	remote := ""
	if t, ok := p.set.Lookup(name); ok {
		remote = t.RemoteName
	}
	line, _ := json.Marshal(auditLine{
		Time: start.UTC().Format(time.RFC3339Nano), User: p.user, Tool: refusal.Clip(name, 128), RemoteName: remote,
		Snapshot: p.set.SnapshotDigest(), Profile: p.set.ProfileDigest(), Outcome: outcome,
		DurationMS: time.Since(start).Milliseconds(),
	})
	p.logMu.Lock()
	fmt.Fprintf(p.audit, "%s\n", line)
	p.logMu.Unlock()
	return res
}

// refusedResult is the error result the agent sees for a refusal: its name, nothing else.
func refusedResult(name string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused: " + name}}}
}

// watch observes every tool-list change the upstream reports: the fresh listing is a candidate
// for review (its classified diff is logged) and withdraws the tools it changed or removed.
func (p *proxy) watch(ctx context.Context, sess *mcpclient.Session) {
	ch := sess.ToolListChanged()
	if ch == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		p.relist.Lock()
		live, err := sess.ListTools(ctx)
		var cand *admission.Candidate
		if err == nil {
			cand, err = p.set.Observe(live)
		}
		p.relist.Unlock()
		p.logMu.Lock()
		switch {
		case err != nil:
			fmt.Fprintf(p.env.stderr, "Tool list changed during the run; re-list refused: %s\n", refusalOr(err, outcomeCallFailed))
		default:
			fmt.Fprintf(p.env.stderr, "Tool list changed during the run: candidate snapshot %s; withdrawn for the rest of the run: %s\n",
				cand.Snapshot.Digest, listOrNone(cand.Withdrawn))
			fmt.Fprint(p.env.stderr, formatReport(cand.Report))
		}
		p.logMu.Unlock()
	}
}

func refusalOr(err error, def string) string {
	if n := refusal.Name(err); n != "" {
		return n
	}
	return def
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// formatReport renders a classified diff for people: names, digests, JSON Pointer paths and
// classes, never the descriptors' values (server prose); every name goes through safeText.
func formatReport(r *drift.Report) string {
	var b strings.Builder
	if r.ProtocolFrom != r.ProtocolTo {
		fmt.Fprintf(&b, "~ protocol %s -> %s [%s]\n", safeText(r.ProtocolFrom), safeText(r.ProtocolTo), drift.ClassProtocolChange)
	}
	for _, t := range r.Tools {
		switch t.Kind {
		case drift.KindAdded:
			fmt.Fprintf(&b, "+ added   %q %s [%s]\n", safeText(t.Name), t.To, strings.Join(t.Classes, ","))
		case drift.KindRemoved:
			fmt.Fprintf(&b, "- removed %q %s [%s]\n", safeText(t.Name), t.From, strings.Join(t.Classes, ","))
		default:
			fmt.Fprintf(&b, "~ changed %q %s -> %s [%s]\n", safeText(t.Name), t.From, t.To, strings.Join(t.Classes, ","))
			for _, c := range t.Changes {
				fmt.Fprintf(&b, "    %s [%s]\n", safeText(c.Path), strings.Join(c.Classes, ","))
			}
		}
		for _, fl := range t.Flags {
			fmt.Fprintf(&b, "    flag: %s\n", fl)
		}
		for _, w := range t.Warnings {
			fmt.Fprintf(&b, "    warning: %s at %s\n", w.Code, safeText(w.Path))
		}
	}
	return b.String()
}

// formatRefused lists the tools not served and why.
func formatRefused(rs []admission.Refused) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Operation != "" {
			fmt.Fprintf(&b, "not served: %q (%s): %s\n", safeText(r.Tool), r.Operation, r.Refusal)
		} else {
			fmt.Fprintf(&b, "not served: %q: %s\n", safeText(r.Tool), r.Refusal)
		}
	}
	return b.String()
}
