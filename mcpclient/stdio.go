package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/snapshot"
)

// terminateGrace is how long a stdio server may take to exit after its stdin is closed before it
// (and its process group) is killed.
const terminateGrace = 2 * time.Second

// stdioTransport starts the server process itself (argv only, exact environment, bounded stderr,
// bounded lines) and hands the pipes to the SDK's IOTransport.
type stdioTransport struct {
	cfg  *StdioServer
	lim  Limits
	reg  *registry
	proc *process
}

func childEnv(cfg *StdioServer) []string {
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := []string{} // non-nil: exec must not inherit the parent environment
	seen := map[string]bool{}
	for _, name := range cfg.InheritEnv {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	path, err := exec.LookPath(t.cfg.Argv[0])
	if err != nil {
		return nil, &TransportError{Op: "spawn", Err: ErrSpawn}
	}
	// argv only, never a shell: the program and arguments are the configured ones.
	cmd := exec.CommandContext(context.Background(), path, t.cfg.Argv[1:]...) //nolint:gosec // G204: running the configured server is the point
	cmd.Args[0] = t.cfg.Argv[0]
	cmd.Env = childEnv(t.cfg)
	cmd.Dir = t.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &boundedBuffer{max: t.lim.MaxStderrBytes}
	var files []*os.File // child ends and our ends, in pairs
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, &TransportError{Op: "spawn", Err: ErrSpawn}
		}
		files = append(files, r, w)
	}
	inR, inW, outR, outW, errR, errW := files[0], files[1], files[2], files[3], files[4], files[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, &TransportError{Op: "spawn", Err: ErrSpawn}
	}
	inR.Close()
	outW.Close()
	errW.Close()
	p := &process{cmd: cmd, stdin: inW, stdout: outR, stderr: stderr, exited: make(chan struct{}), stderrDone: make(chan struct{})}
	go func() {
		_, _ = io.Copy(stderr, errR)
		errR.Close()
		close(p.stderrDone)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.proc = p
	lines := &lineLimitReader{r: outR, limit: t.lim.MaxFrameBytes, reg: t.reg}
	inner, err := (&mcp.IOTransport{
		Reader: readCloser{lines, p},
		Writer: p,
		// The SDK's own cap sits above ours so that ours (a named refusal) fires first.
		MaxLineLength: t.lim.MaxFrameBytes + 1<<16,
	}).Connect(ctx)
	if err != nil {
		p.kill()
		return nil, &TransportError{Op: "spawn", Err: ErrSpawn}
	}
	return &captureConn{Connection: inner, reg: t.reg}, nil
}

// process is a running stdio server.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *boundedBuffer
	exited chan struct{}
	// stderrDone is closed when the server's stderr has been read to its end.
	stderrDone chan struct{}
	once       sync.Once
}

// Write sends bytes to the server's stdin.
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close closes stdin, waits briefly for the server to exit, then kills its process group.
func (p *process) Close() error {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(terminateGrace):
			p.killGroup()
			<-p.exited
		}
		p.stdout.Close()
		p.drainStderr()
	})
	return nil
}

// drainStderr waits (at most terminateGrace: a process the server started may still hold the
// pipe) until the exited server's stderr has been captured, so Stderr is final after Close.
func (p *process) drainStderr() {
	select {
	case <-p.stderrDone:
	case <-time.After(terminateGrace):
	}
}

// kill ends the server at once (a failed probe).
func (p *process) kill() {
	p.once.Do(func() {
		p.stdin.Close()
		p.killGroup()
		<-p.exited
		p.stdout.Close()
	})
}

func (p *process) killGroup() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Process.Kill()
	}
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// readCloser closes the process when the SDK closes the reading side.
type readCloser struct {
	io.Reader
	p *process
}

func (r readCloser) Close() error { return r.p.Close() }

// lineLimitReader refuses a stdio line longer than limit bytes ("frame_too_large") or one that is
// not JSON ("invalid_json"), before the SDK decodes it.
type lineLimitReader struct {
	r     io.Reader
	limit int
	line  []byte
	reg   *registry
	err   error
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(l.line)+len(rest) > l.limit {
				l.line = nil
				return l.refuse(frameRefusal(l.limit))
			}
			l.line = append(l.line, rest...)
			break
		}
		if len(l.line)+i > l.limit {
			l.line = nil
			return l.refuse(frameRefusal(l.limit))
		}
		frame := rest[:i] // a whole line within p is checked where it is, not copied
		if len(l.line) > 0 {
			l.line = append(l.line, frame...)
			frame = l.line
		}
		rest = rest[i+1:]
		frame = bytes.TrimSpace(frame)
		l.line = l.line[:0]
		if len(frame) > 0 && !json.Valid(frame) {
			return l.refuse(refuse(snapshot.RefusalInvalidJSON, "", 0, snapshot.ErrInvalidJSON))
		}
	}
	return n, err
}

func (l *lineLimitReader) refuse(err error) (int, error) {
	l.err = err
	l.reg.failAll(err)
	return 0, err
}

// boundedBuffer keeps the first max bytes written to it and counts the rest.
type boundedBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (b *boundedBuffer) bytes() ([]byte, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...), b.dropped
}
