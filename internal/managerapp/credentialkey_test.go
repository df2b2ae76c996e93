package managerapp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The credential hash key: a file of at least 32 bytes gives the same key on every load (stable
// across restarts); a short file is refused by name; no file gives a random key, flagged.
func TestLoadCredentialHashKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	k1, eph, err := LoadCredentialHashKey(good)
	if err != nil || eph {
		t.Fatalf("key file: %v ephemeral=%v", err, eph)
	}
	k2, _, _ := LoadCredentialHashKey(good)
	if string(k1) != string(k2) {
		t.Fatal("the same file gave another key")
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("too-short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCredentialHashKey(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short key: %v", err)
	}
	if _, _, err := LoadCredentialHashKey(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "--credential-hash-key-file") {
		t.Fatalf("absent key file: %v", err)
	}
	r1, eph1, err := LoadCredentialHashKey("")
	r2, _, _ := LoadCredentialHashKey("")
	if err != nil || !eph1 || len(r1) < 32 || string(r1) == string(r2) {
		t.Fatalf("random key: %v ephemeral=%v", err, eph1)
	}
}
