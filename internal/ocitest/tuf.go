package ocitest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TUFRepo is a real TUF repository (go-tuf metadata, ed25519-signed top-level roles, consistent
// snapshots) serving one target, trusted_root.json, over HTTP on loopback: a self-hosted
// stand-in for sigstore's public-good TUF mirror.
type TUFRepo struct {
	// URL is the repository's base URL (http://127.0.0.1:PORT).
	URL string
	// RootJSON is the repository's 1.root.json: the anchor a client trusts it by.
	RootJSON []byte

	files       map[string][]byte
	srv         *httptest.Server
	requests    atomic.Int64
	unavailable atomic.Bool
}

// Requests returns the number of requests received so far (answered or not).
func (r *TUFRepo) Requests() int64 { return r.requests.Load() }

// SetUnavailable makes the repository answer every request 503 Service Unavailable with an HTML
// page (a mirror down for maintenance) while down is true.
func (r *TUFRepo) SetUnavailable(down bool) { r.unavailable.Store(down) }

// NewTUFRepo starts a repository serving trustedRoot as trusted_root.json; Close stops it.
func NewTUFRepo(trustedRoot []byte) (*TUFRepo, error) {
	expires := time.Now().AddDate(0, 0, 1).UTC()
	rt, tg, sn, ts := metadata.Root(expires), metadata.Targets(expires), metadata.Snapshot(expires), metadata.Timestamp(expires)
	signers := map[string]signature.Signer{}
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		k, err := metadata.KeyFromPublicKey(pub)
		if err != nil {
			return nil, err
		}
		if err := rt.Signed.AddKey(k, role); err != nil {
			return nil, err
		}
		if signers[role], err = signature.LoadSigner(priv, crypto.Hash(0)); err != nil {
			return nil, err
		}
	}
	tf, err := metadata.TargetFile().FromBytes("trusted_root.json", trustedRoot, "sha256")
	if err != nil {
		return nil, err
	}
	tg.Signed.Targets["trusted_root.json"] = tf
	sn.Signed.Meta["targets.json"] = metadata.MetaFile(tg.Signed.Version)
	ts.Signed.Meta["snapshot.json"] = metadata.MetaFile(sn.Signed.Version)
	if _, err := rt.Sign(signers[metadata.ROOT]); err != nil {
		return nil, err
	}
	if _, err := tg.Sign(signers[metadata.TARGETS]); err != nil {
		return nil, err
	}
	if _, err := sn.Sign(signers[metadata.SNAPSHOT]); err != nil {
		return nil, err
	}
	if _, err := ts.Sign(signers[metadata.TIMESTAMP]); err != nil {
		return nil, err
	}
	r := &TUFRepo{files: map[string][]byte{}}
	for name, m := range map[string]interface{ ToBytes(bool) ([]byte, error) }{
		"/1.root.json": rt, "/1.targets.json": tg, "/1.snapshot.json": sn, "/timestamp.json": ts,
	} {
		b, err := m.ToBytes(false)
		if err != nil {
			return nil, fmt.Errorf("ocitest: TUF %s: %w", name, err)
		}
		r.files[name] = b
	}
	sum := sha256.Sum256(trustedRoot)
	r.files["/targets/"+hex.EncodeToString(sum[:])+".trusted_root.json"] = trustedRoot
	r.RootJSON = r.files["/1.root.json"]
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if r.unavailable.Load() {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html><body>down for maintenance: see https://status.tuf.example/?token=hunter2</body></html>"))
			return
		}
		b, ok := r.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	}))
	r.URL = r.srv.URL
	return r, nil
}

// Close stops the repository.
func (r *TUFRepo) Close() { r.srv.Close() }
