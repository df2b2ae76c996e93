package devnode

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// useStateFile points StateFile at a file of the test's.
func useStateFile(t *testing.T) {
	t.Helper()
	old := StateFile
	StateFile = filepath.Join(t.TempDir(), "state.json")
	t.Cleanup(func() { StateFile = old })
}

// TestSweepStaleRemovesADeadNodesLeftovers: the record of a node whose process is gone is swept —
// its work directory removed, the record too — and a second Start-time sweep finds nothing.
func TestSweepStaleRemovesADeadNodesLeftovers(t *testing.T) {
	useStateFile(t)
	if err := sweepStale(); err != nil {
		t.Fatalf("no record: %v", err)
	}
	work := filepath.Join(t.TempDir(), "node")
	if err := os.MkdirAll(filepath.Join(work, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	dead := exec.CommandContext(t.Context(), "true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	n := &Node{WorkDir: work}
	if err := n.saveState(); err != nil {
		t.Fatal(err)
	}
	rewritePID(t, dead.Process.Pid)
	if err := sweepStale(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead node's work directory is still there: %v", err)
	}
	if _, err := os.Stat(StateFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record is still there: %v", err)
	}
}

// TestSweepStaleRefusesALiveNode is the twin: a node whose process runs is ErrBusy and nothing of
// it is touched.
func TestSweepStaleRefusesALiveNode(t *testing.T) {
	useStateFile(t)
	live := exec.CommandContext(t.Context(), "sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	work := t.TempDir()
	if err := (&Node{WorkDir: work}).saveState(); err != nil {
		t.Fatal(err)
	}
	rewritePID(t, live.Process.Pid)
	if err := sweepStale(); !errors.Is(err, ErrBusy) {
		t.Fatalf("sweep of a live node: %v, want ErrBusy", err)
	}
	if _, err := os.Stat(work); err != nil {
		t.Errorf("the live node's work directory was touched: %v", err)
	}
	if s, err := readState(); err != nil || s == nil {
		t.Errorf("the live node's record is gone: %v", err)
	}
}

// rewritePID makes the record name pid as the node's process.
func rewritePID(t *testing.T, pid int) {
	t.Helper()
	s, err := readState()
	if err != nil || s == nil {
		t.Fatalf("read the record: %v", err)
	}
	s.PID = pid
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(StateFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
