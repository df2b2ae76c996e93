package devnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop ends the node and restores the machine: the kubelet and kube-proxy first, then every
// process in the node's cgroups (the containers), containerd's shims, containerd, the controllers,
// the apiserver and etcd, each by PID; then it unmounts everything below the work directory,
// removes the node's cgroups, the veth pair and the namespace, puts back every GlobalSysctls value
// that changed, removes any of GlobalPaths the node created and the work directory. Last it reads
// the machine again and returns ErrDirty, listing each difference, if anything is not as Start
// found it. Stop is idempotent.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, name := range []string{"kubelet", "kube-proxy"} {
		n.kill(name)
	}
	if n.cgroup != "" {
		killCgroups()
	}
	killShims(n.containerdSocket())
	for _, name := range []string{"containerd", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd"} {
		n.kill(name)
	}
	for _, p := range n.procs {
		_ = p.log.Close()
	}
	if n.registry != nil {
		n.registry.stop()
	}
	if err := unmountBelow(n.WorkDir); err != nil {
		errs = append(errs, err)
	}
	if n.cgroup != "" {
		for _, d := range cgroupDirs() {
			if err := removeCgroupTree(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if n.hostLink != "" {
		if err := run(ctx, "ip", "link", "del", n.hostLink); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	if n.before != nil {
		for k, v := range n.before.Sysctls {
			if v == "absent" {
				continue
			}
			p := filepath.Join("/proc/sys", k)
			if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
				if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
					errs = append(errs, fmt.Errorf("restore %s: %w", k, err))
				}
			}
		}
		for _, p := range GlobalPaths {
			if slices.Contains(n.before.Paths, p) {
				continue
			}
			if _, err := os.Lstat(p); err == nil {
				_ = unmountBelow(p)
				if err := os.RemoveAll(p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if n.WorkDir != "" && n.o.WorkDir == "" {
		if err := os.RemoveAll(n.WorkDir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeState(); err != nil {
		errs = append(errs, err)
	}
	if n.before != nil {
		// Links and cgroups of a just-destroyed namespace disappear asynchronously: give the kernel
		// a moment before calling a difference a leak.
		var diff []string
		for range 20 {
			after, err := ReadMachine(ctx)
			if err != nil {
				errs = append(errs, err)
				break
			}
			if diff = n.before.Diff(after); len(diff) == 0 {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if len(diff) > 0 {
			errs = append(errs, fmt.Errorf("%w:\n  %s", ErrDirty, strings.Join(diff, "\n  ")))
		}
	}
	return errors.Join(errs...)
}

// kill ends the named component: SIGTERM to its process group, SIGKILL after 15 s.
func (n *Node) kill(name string) {
	for _, p := range n.procs {
		if p.name != name || p.cmd.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// killCgroups SIGKILLs every process in the node's cgroups until none is left (at most 20 s).
func killCgroups() {
	for range 80 {
		pids := map[int]bool{}
		for _, d := range cgroupDirs() {
			_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
				if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
					return nil //nolint:nilerr // a cgroup vanishing mid-walk is expected
				}
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// killShims SIGKILLs the containerd shims serving the node's containerd (their command line names
// its socket), and waits for them to go.
func killShims(socket string) {
	killMatching(func(proc string) bool {
		comm, _ := os.ReadFile(filepath.Join(proc, "comm"))
		if !strings.HasPrefix(strings.TrimSpace(string(comm)), "containerd-shim") {
			return false
		}
		cmdline, _ := os.ReadFile(filepath.Join(proc, "cmdline"))
		return bytes.Contains(cmdline, []byte(socket))
	})
}

// killMatching SIGKILLs every process whose /proc directory match accepts, until none is left
// (at most 10 s).
func killMatching(match func(procDir string) bool) {
	for range 40 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || !match(filepath.Join("/proc", e.Name())) {
				continue
			}
			found = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unmountBelow detaches every mount at or below dir, deepest first.
func unmountBelow(dir string) error {
	if dir == "" {
		return nil
	}
	dir = filepath.Clean(dir)
	for range 5 {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		var points []string
		for line := range strings.Lines(string(mi)) {
			f := strings.Fields(line)
			if len(f) > 4 {
				p := unescapeMount(f[4])
				if p == dir || strings.HasPrefix(p, dir+"/") {
					points = append(points, p)
				}
			}
		}
		if len(points) == 0 {
			return nil
		}
		slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
	return fmt.Errorf("devnode: mounts below %s remain", dir)
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroupTree removes a cgroup directory and its children, deepest first (cgroupfs allows
// only rmdir of an empty cgroup).
func removeCgroupTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	var last error
	for _, d := range dirs {
		for range 20 {
			if last = syscall.Rmdir(d); last == nil || errors.Is(last, syscall.ENOENT) {
				last = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if last != nil {
		return fmt.Errorf("devnode: remove cgroup %s: %w", root, last)
	}
	return nil
}
