package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	k8sjson "sigs.k8s.io/json"
)

// maxRecordSize bounds a credential or registration file.
const maxRecordSize = 1 << 20

// ErrNoStateDir reports that neither XDG_STATE_HOME nor HOME names an absolute directory, so
// there is no place for credentials.
var ErrNoStateDir = errors.New("oauth: neither XDG_STATE_HOME nor HOME is an absolute directory")

// DefaultDir returns the CLI's credential directory: $XDG_STATE_HOME/connector-mcp/oauth, or
// $HOME/.local/state/connector-mcp/oauth when XDG_STATE_HOME is unset or not absolute (as the
// XDG Base Directory specification requires), or [ErrNoStateDir]. Only getenv is consulted
// (usually [os.Getenv]).
func DefaultDir(getenv func(string) string) (string, error) {
	base := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return "", ErrNoStateDir
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "connector-mcp", "oauth"), nil
}

// XDGStore is the CLI's file-backed [Store]. Layout under its directory (mode 0700):
// credentials/<sha256(resource, issuer)>.json and clients/<sha256(issuer)>.json, each 0600,
// written to a temporary file, synced and renamed into place, so a crash mid-write leaves the
// previous record intact. A file or directory that is readable or writable by group or
// others, owned by another user, a symbolic link, or not a valid record is refused with a
// [*StoreError] rather than used.
type XDGStore struct {
	dir string
	uid int

	// beforeRename, when set (tests), runs after the temporary file is written and synced and
	// before it is renamed into place; an error simulates a crash at that point.
	beforeRename func(tmp string) error
}

// NewXDGStore returns a store rooted at dir (see [DefaultDir]). Directories are created on
// first write.
func NewXDGStore(dir string) *XDGStore { return &XDGStore{dir: dir, uid: os.Getuid()} }

// Dir returns the store's root directory.
func (s *XDGStore) Dir() string { return s.dir }

func hashName(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)) + ".json"
}

func (s *XDGStore) credPath(k Key) string {
	return filepath.Join(s.dir, "credentials", hashName(k.Resource, k.Issuer))
}

func (s *XDGStore) regPath(issuer string) string {
	return filepath.Join(s.dir, "clients", hashName(issuer))
}

// checkInfo applies the custody rules to one file or directory.
func (s *XDGStore) checkInfo(path string, fi fs.FileInfo, wantDir bool) error {
	if fi.Mode()&fs.ModeSymlink != 0 || fi.IsDir() != wantDir || (!wantDir && !fi.Mode().IsRegular()) {
		return &StoreError{Path: path, Name: RefusalStoreNotRegular}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != s.uid {
		return &StoreError{Path: path, Name: RefusalStoreForeignOwner}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &StoreError{Path: path, Name: RefusalStoreInsecure}
	}
	return nil
}

// checkDir verifies (creating when create is set) the root and the sub directory sub.
func (s *XDGStore) checkDir(sub string, create bool) error {
	for _, d := range []string{s.dir, filepath.Join(s.dir, sub)} {
		if create {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if err := s.checkInfo(d, fi, true); err != nil {
			return err
		}
	}
	return nil
}

// readRecord reads and decodes one record file after checking it; v must be a pointer.
func (s *XDGStore) readRecord(path string, v any) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0) //nolint:gosec // G304: path is the store's own directory joined with a hashed record name

	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ErrNotFound
		}
		if errors.Is(err, syscall.ELOOP) {
			return &StoreError{Path: path, Name: RefusalStoreNotRegular}
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := s.checkInfo(path, fi, false); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return err
	}
	// Exact-case member names, no duplicate or unknown members, no trailing data: a "Resource"
	// or a second "issuer" is not another way to bind the credential.
	if len(data) > maxRecordSize {
		return &StoreError{Path: path, Name: RefusalStoreCorrupt}
	}
	if strict, err := k8sjson.UnmarshalStrict(data, v); err != nil || len(strict) > 0 {
		return &StoreError{Path: path, Name: RefusalStoreCorrupt}
	}
	return nil
}

// writeRecord atomically replaces path with the JSON form of v (mode 0600).
func (s *XDGStore) writeRecord(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if s.beforeRename != nil {
		if err := s.beforeRename(tmpName); err != nil {
			ok = true // a simulated crash leaves the temporary file behind, as a real one would
			return err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil { //nolint:gosec // G304: the store's own directory, opened to fsync the rename

		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Load implements [Store].
func (s *XDGStore) Load(_ context.Context, key Key) (*Credential, error) {
	if err := s.checkDir("credentials", false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	path := s.credPath(key)
	var c Credential
	if err := s.readRecord(path, &c); err != nil {
		return nil, err
	}
	if c.Key != key {
		return nil, &StoreError{Path: path, Name: RefusalStoreCorrupt}
	}
	return &c, nil
}

// Save implements [Store].
func (s *XDGStore) Save(_ context.Context, c *Credential) error {
	if err := s.checkDir("credentials", true); err != nil {
		return err
	}
	return s.writeRecord(s.credPath(c.Key), c)
}

// Delete implements [Store].
func (s *XDGStore) Delete(_ context.Context, key Key) error {
	if err := s.checkDir("credentials", false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := os.Remove(s.credPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List implements [Store]. Temporary files left by an interrupted write are ignored; any other
// file that fails the custody checks makes List fail.
func (s *XDGStore) List(_ context.Context, resource string) ([]*Credential, error) {
	dir := filepath.Join(s.dir, "credentials")
	if err := s.checkDir("credentials", false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*Credential
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		var c Credential
		if err := s.readRecord(path, &c); err != nil {
			return nil, err
		}
		if s.credPath(c.Key) != path {
			return nil, &StoreError{Path: path, Name: RefusalStoreCorrupt}
		}
		if resource == "" || c.Resource == resource {
			out = append(out, &c)
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// LoadRegistration implements [Store].
func (s *XDGStore) LoadRegistration(_ context.Context, issuer string) (*Registration, error) {
	if err := s.checkDir("clients", false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	path := s.regPath(issuer)
	var r Registration
	if err := s.readRecord(path, &r); err != nil {
		return nil, err
	}
	if r.Issuer != issuer {
		return nil, &StoreError{Path: path, Name: RefusalStoreCorrupt}
	}
	return &r, nil
}

// SaveRegistration implements [Store].
func (s *XDGStore) SaveRegistration(_ context.Context, r *Registration) error {
	if err := s.checkDir("clients", true); err != nil {
		return err
	}
	if r.Registered.IsZero() {
		r.Registered = time.Now().UTC()
	}
	return s.writeRecord(s.regPath(r.Issuer), r)
}
