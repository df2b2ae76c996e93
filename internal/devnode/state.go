package devnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// StateFile records the node running on this machine (one at a time: the addresses, the cgroup
// root and the global settings are the machine's): the PID of the process that started it, its
// work directory, its link, and the machine as Start found it. Start writes it first and Stop
// removes it last, so a node whose process was killed (SIGKILL, a crashed test binary) is found by
// the next Start, which sweeps it — kills what it left running, unmounts, removes its cgroups,
// link and work directory, restores the settings it changed — before starting anew. A tmpfs path:
// a reboot clears the record together with everything it describes.
var StateFile = "/run/connector-mcp-devnode.json"

// ErrBusy means another process runs a node on this machine now.
var ErrBusy = errors.New("devnode: another node runs on this machine")

// state is StateFile's content.
type state struct {
	PID      int      `json:"pid"`
	WorkDir  string   `json:"workDir"`
	OwnDir   bool     `json:"ownWorkDir"` // the work directory is the node's (removed on Stop)
	HostLink string   `json:"hostLink,omitempty"`
	Cgroups  bool     `json:"cgroups,omitempty"`
	Before   *Machine `json:"before"`
}

// saveState writes StateFile for n (atomically: a rename).
func (n *Node) saveState() error {
	b, err := json.Marshal(state{PID: os.Getpid(), WorkDir: n.WorkDir, OwnDir: n.o.WorkDir == "", HostLink: n.hostLink,
		Cgroups: n.cgroup != "", Before: n.before})
	if err != nil {
		return err
	}
	tmp := StateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, StateFile)
}

// removeState removes StateFile if it is this process's record.
func removeState() error {
	s, err := readState()
	if err != nil || s == nil || s.PID != os.Getpid() {
		return err
	}
	if err := os.Remove(StateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func readState() (*state, error) {
	b, err := os.ReadFile(StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("devnode: %s: %w", StateFile, err)
	}
	return &s, nil
}

// alive reports whether pid is a running process other than this one.
func alive(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepStale finds a node left behind by a process that no longer runs and stops it as its own
// Stop would have; a node whose process still runs is ErrBusy. No record: nothing to do.
func sweepStale() error {
	s, err := readState()
	if err != nil || s == nil {
		return err
	}
	if alive(s.PID) {
		return fmt.Errorf("%w (pid %d, work directory %s): stop it first", ErrBusy, s.PID, s.WorkDir)
	}
	stale := &Node{WorkDir: s.WorkDir, hostLink: s.HostLink, before: s.Before, netns: filepath.Join(s.WorkDir, "netns", "node")}
	if !s.OwnDir {
		stale.o.WorkDir = s.WorkDir
	}
	if s.Cgroups {
		stale.cgroup = cgroupRoot
	}
	killNamespace(stale.netns)
	if err := stale.stop(); err != nil {
		return fmt.Errorf("devnode: sweeping the node left by pid %d: %w", s.PID, err)
	}
	if err := os.Remove(StateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// killNamespace SIGKILLs every process in the network namespace bound at path (the components a
// dead node's process started there, should any have outlived it), until none is left.
func killNamespace(path string) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return
	}
	want := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"
	killMatching(func(proc string) bool {
		ns, err := os.Readlink(filepath.Join(proc, "ns", "net"))
		return err == nil && ns == want
	})
}
