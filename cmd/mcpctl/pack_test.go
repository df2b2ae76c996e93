package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

const (
	cliRepo    = "git+https://github.com/acme/profiles"
	cliRef     = "refs/heads/main"
	cliBuilder = "https://ci.acme.example/pack"
	cliRev     = "89abcdef0123456789abcdef0123456789abcdef"
	cliIssuer  = "https://token.actions.example.com"
	cliSubject = "https://github.com/acme/profiles/.github/workflows/pack.yml@refs/heads/main"
)

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &cliEnv{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return env[k] },
	}, args)
	return cliResult{code, out.String(), errb.String()}
}

func (r cliResult) wantRefusal(t *testing.T, name string) {
	t.Helper()
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+name+"\n") {
		t.Fatalf("want refusal %s (exit 3), got exit %d\nstderr: %s", name, r.code, r.stderr)
	}
}

// writeProfile writes a reviewed (or draft) profile as YAML and returns its path.
func writeProfile(t *testing.T, dir, name string, reviewed bool) string {
	t.Helper()
	s, err := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: name}, []json.RawMessage{
		json.RawMessage(`{"name":"search","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"delete","inputSchema":{"type":"object"}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(s)
	if reviewed {
		for i := range doc.Operations {
			doc.Operations[i].Effect = apiv1.EffectWrite
		}
	}
	b, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cosignKeyPair returns the fixture key pair made by "cosign generate-key-pair" (cosign v3.1.3:
// "ENCRYPTED SIGSTORE PRIVATE KEY", scrypt + secretbox), password cosignTestPassword. A fixture,
// because it is the real tool's output and because scrypt makes generating one cost seconds under
// -race.
func cosignKeyPair(t *testing.T) (priv, pub string) {
	t.Helper()
	b, err := os.ReadFile("testdata/cosign.key")
	if err != nil || !bytes.Contains(b, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("fixture testdata/cosign.key: %v", err)
	}
	return "testdata/cosign.key", "testdata/cosign.pub"
}

const cosignTestPassword = "pw"

// plainKeyPair writes an unencrypted PKCS#8 PEM private key and its public key (the "plain PEM
// private key" form of --key; cheaper than the scrypt-encrypted cosign form under -race).
func plainKeyPair(t *testing.T, dir string) (priv, pub string) {
	t.Helper()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(privPEM, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Fatalf("not a plain PKCS#8 key: %s", privPEM[:40])
	}
	priv, pub = filepath.Join(dir, "plain.key"), filepath.Join(dir, "plain.pub")
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func pushCLI(t *testing.T, host string, files ...string) string {
	t.Helper()
	r := runCLI(t, nil, append(append([]string{"pack", "push"}, files...), "--to", host+"/team/acme", "--plain-http")...)
	if r.code != 0 {
		t.Fatalf("push: exit %d: %s", r.code, r.stderr)
	}
	ref := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(ref, host+"/team/acme@sha256:") {
		t.Fatalf("push printed %q", ref)
	}
	return ref
}

func TestPackPushSignVerifyWithKey(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		name := "referrers-api"
		if !referrers {
			name = "tag-schema-fallback"
		}
		t.Run(name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: referrers})
			defer reg.Close()
			dir := t.TempDir()
			ref := pushCLI(t, reg.Host, writeProfile(t, dir, "acme", true))
			// The cosign encrypted key format (password from COSIGN_PASSWORD) on the native path,
			// a plain PEM private key on the fallback path.
			key, pub := plainKeyPair(t, dir)
			env := map[string]string{}
			if referrers {
				key, pub = cosignKeyPair(t)
				env["COSIGN_PASSWORD"] = cosignTestPassword
			}

			r := runCLI(t, env, "pack", "sign", ref, "--key", key, "--plain-http",
				"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef,
				"--provenance-revision", cliRev, "--provenance-builder-id", cliBuilder)
			if r.code != 0 {
				t.Fatalf("sign: exit %d: %s", r.code, r.stderr)
			}
			verifyArgs := []string{"pack", "verify", ref, "--key", pub, "--plain-http",
				"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef, "--provenance-builder-id", cliBuilder}
			r = runCLI(t, nil, verifyArgs...)
			if r.code != 0 {
				t.Fatalf("verify: exit %d: %s", r.code, r.stderr)
			}
			var out struct {
				Verified ociregistry.Result `json:"verified"`
				Profiles []struct {
					ProfileDigest string `json:"profileDigest"`
					ServiceRef    string `json:"serviceRef"`
				} `json:"profiles"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			if out.Verified.SourceRevision != cliRev || out.Verified.SourceRef != cliRef || out.Verified.KeyID == "" ||
				len(out.Profiles) != 1 || out.Profiles[0].ServiceRef != "acme" {
				t.Fatalf("verify output: %s", r.stdout)
			}

			// Must-fail twins, each with its reason.
			runCLI(t, nil, replaceArg(verifyArgs, cliRef, "refs/heads/feature")...).wantRefusal(t, "wrong_source_ref")
			runCLI(t, nil, replaceArg(verifyArgs, cliBuilder, "https://laptop.example")...).wantRefusal(t, "wrong_builder")
			runCLI(t, nil, replaceArg(verifyArgs, cliRepo, "git+https://github.com/mallory/profiles")...).wantRefusal(t, "wrong_source_repository")
			_, otherPub := plainKeyPair(t, t.TempDir())
			runCLI(t, nil, replaceArg(verifyArgs, pub, otherPub)...).wantRefusal(t, "untrusted_signature")
			tag := strings.SplitN(ref, "@", 2)[0] + ":latest"
			runCLI(t, nil, replaceArg(verifyArgs, ref, tag)...).wantRefusal(t, "digest_required")

			if referrers {
				return // the rest needs a second signature: once is enough for the scrypt-encrypted key
			}
			// The same policy from a file (public key path relative to the file).
			if err := os.WriteFile(filepath.Join(dir, "plain.policy.json"), []byte(`{"publicKeyFile":"plain.pub",`+
				`"provenance":{"sourceRepository":"`+cliRepo+`","sourceRef":"`+cliRef+`","builderID":"`+cliBuilder+`"}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := runCLI(t, nil, "pack", "verify", ref, "--plain-http", "--policy", filepath.Join(dir, "plain.policy.json")); r.code != 0 {
				t.Fatalf("verify --policy: exit %d: %s", r.code, r.stderr)
			}
			if err := os.WriteFile(filepath.Join(dir, "bad.policy.json"), []byte(`{"publicKeyFile":"plain.pub","risk":"low"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := runCLI(t, nil, "pack", "verify", ref, "--plain-http", "--policy", filepath.Join(dir, "bad.policy.json")); r.code != exitUsage {
				t.Fatalf("a policy file with an unknown field must be a usage error, got exit %d", r.code)
			}
			// A pack signed without provenance has no attestation.
			ref2 := pushCLI(t, reg.Host, writeProfile(t, dir, "other", true))
			if r := runCLI(t, env, "pack", "sign", ref2, "--key", key, "--plain-http"); r.code != 0 {
				t.Fatalf("sign: %s", r.stderr)
			}
			runCLI(t, nil, replaceArg(verifyArgs, ref, ref2)...).wantRefusal(t, "missing_attestation")
		})
	}
}

func TestPackVerifyTamperedLayerRefused(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	dir := t.TempDir()
	ref := pushCLI(t, reg.Host, writeProfile(t, dir, "acme", true))
	key, pub := plainKeyPair(t, dir)
	if r := runCLI(t, nil, "pack", "sign", ref, "--key", key, "--plain-http",
		"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef); r.code != 0 {
		t.Fatalf("sign: %s", r.stderr)
	}
	out := t.TempDir()
	r := runCLI(t, nil, "pack", "pull", ref, "--plain-http", "--output-dir", out)
	if r.code != 0 {
		t.Fatalf("pull: %s", r.stderr)
	}
	written, err := os.ReadFile(filepath.Join(out, "acme.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := ocipack.DecodeProfile(written); err != nil || ocipack.Validate(d) != nil {
		t.Fatalf("pulled profile file does not decode and validate: %v", err)
	}
	parsed, _ := ociregistry.ParseDigestReference(ref)
	p, err := (&ociregistry.Client{PlainHTTP: true}).Pull(context.Background(), parsed)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ociregistry.ParseManifest(p.Manifest, ociregistry.Limits{})
	reg.Tamper(m.Layers[0].Digest.String(), bytes.Replace(p.Layers[0], []byte(`"write"`), []byte(`"read!"`), 1))
	runCLI(t, nil, "pack", "verify", ref, "--key", pub, "--plain-http",
		"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef).wantRefusal(t, "blob_digest_mismatch")
	runCLI(t, nil, "pack", "pull", ref, "--plain-http").wantRefusal(t, "blob_digest_mismatch")
}

func TestPackCLIRefusals(t *testing.T) {
	dir := t.TempDir()
	draft := writeProfile(t, dir, "draft", false)
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	runCLI(t, nil, "pack", "push", draft, "--to", reg.Host+"/team/acme", "--plain-http").wantRefusal(t, "unreviewed")
	runCLI(t, nil, "pack", "push", writeProfile(t, dir, "ok", true), "--to", "registry.example.com/team/acme", "--plain-http").wantRefusal(t, "plain_http_not_loopback")
	runCLI(t, nil, "pack", "pull", reg.Host+"/team/acme:v1", "--plain-http").wantRefusal(t, "digest_required")
	key, _ := cosignKeyPair(t)
	runCLI(t, map[string]string{"COSIGN_PASSWORD": "wrong"}, "pack", "sign", reg.Host+"/team/acme@sha256:"+strings.Repeat("0", 64),
		"--key", key, "--plain-http").wantRefusal(t, "invalid_key")
	if r := runCLI(t, nil, "pack", "push", "--to", reg.Host+"/team/acme"); r.code != exitUsage {
		t.Fatalf("push without files: exit %d", r.code)
	}
	if r := runCLI(t, nil, "pack", "frobnicate"); r.code != exitUsage {
		t.Fatalf("unknown pack command: exit %d", r.code)
	}
}

// cliKeylessCA is the self-hosted Fulcio CA and TSA (ocitest.KeylessCA); trustedRoot is their
// trusted_root.json on disk.
type cliKeylessCA struct {
	*ocitest.KeylessCA
	trustedRoot string
}

func newCLIKeylessCA(t *testing.T, dir, name string) *cliKeylessCA {
	t.Helper()
	k, err := ocitest.NewKeylessCA()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, k.TrustedRootJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cliKeylessCA{KeylessCA: k, trustedRoot: path}
}

// signer is a keyless signer for cliSubject whose certificate certifies the build of
// certifiedRef in the acme/profiles repository, timestamped by the TSA and never logged.
func (k *cliKeylessCA) signer(t *testing.T, certifiedRef string) *ociregistry.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := k.Certificate(&priv.PublicKey, ocitest.CertifiedIdentity{Subject: cliSubject, Issuer: cliIssuer,
		RepositoryURI: strings.TrimPrefix(cliRepo, "git+"), Ref: certifiedRef, RevisionDigest: cliRev})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &ociregistry.Signer{Keypair: kp, CertificateProvider: certProvider(raw),
		Timestamp: func(_ context.Context, sig []byte) ([]byte, error) { return k.Timestamp(sig) }}
}

// TestPackVerifyKeylessWithTrustedRootFile: pack verify applies the manager's strict keyless
// rules. A keyless bundle needs a transparency-log entry (refused missing_tlog_entry, exit 3)
// unless --keyless-without-tlog-unsafe waives it, with a warning; the source the certificate
// certified must match (a feature-branch certificate claiming main is refused); and a subject
// regular expression must be anchored (refused unanchored_subject_regexp).
func TestPackVerifyKeylessWithTrustedRootFile(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: false})
	defer reg.Close()
	dir := t.TempDir()
	kca := newCLIKeylessCA(t, dir, "trusted_root.json")
	sign := func(name, certifiedRef string) string {
		ref := pushCLI(t, reg.Host, writeProfile(t, dir, name, true))
		parsed, _ := ociregistry.ParseDigestReference(ref)
		if _, err := kca.signer(t, certifiedRef).Sign(context.Background(), &ociregistry.Client{PlainHTTP: true}, parsed,
			&ociregistry.Provenance{SourceRepository: cliRepo, SourceRef: cliRef, SourceRevision: cliRev, BuilderID: cliBuilder}); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	ref := sign("acme", cliRef)
	trPath := kca.trustedRoot
	args := []string{"pack", "verify", ref, "--plain-http", "--trusted-root", trPath,
		"--certificate-identity", cliSubject, "--certificate-oidc-issuer", cliIssuer,
		"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef}
	// The production default: no transparency-log entry, refused.
	runCLI(t, nil, args...).wantRefusal(t, "missing_tlog_entry")
	// Waived by name, with a warning.
	args = append(args, "--keyless-without-tlog-unsafe")
	r := runCLI(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, `"subject": "`+cliSubject+`"`) || !strings.Contains(r.stdout, cliRev) ||
		!strings.Contains(r.stderr, "warning: --keyless-without-tlog-unsafe") {
		t.Fatalf("verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	runCLI(t, nil, replaceArg(args, cliSubject, "https://github.com/mallory/x")...).wantRefusal(t, "wrong_identity")
	runCLI(t, nil, replaceArg(args, cliIssuer, "https://accounts.example.org")...).wantRefusal(t, "wrong_issuer")
	// A feature branch's certificate whose predicate claims main.
	runCLI(t, nil, replaceArg(args, ref, sign("acme-feature", "refs/heads/feature"))...).wantRefusal(t, "wrong_certificate_source_ref")

	// The same policy from a file, with an anchored subject expression.
	writePolicy := func(subjectRE string) string {
		policy := "keyless:\n  issuer: " + cliIssuer + "\n  subjectRegExp: '" + subjectRE + "'\ntrustedRoot: trusted_root.json\nprovenance:\n  sourceRepository: " + cliRepo + "\n  sourceRef: " + cliRef + "\n"
		pp := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(pp, []byte(policy), 0o600); err != nil {
			t.Fatal(err)
		}
		return pp
	}
	pp := writePolicy(`^https://github\.com/acme/.*$`)
	if r := runCLI(t, nil, "pack", "verify", ref, "--plain-http", "--policy", pp, "--keyless-without-tlog-unsafe"); r.code != 0 {
		t.Fatalf("verify --policy: exit %d: %s", r.code, r.stderr)
	}
	// Its twin: an unanchored expression (a prefix match) is refused by name.
	pp = writePolicy(`^https://github\.com/acme/`)
	runCLI(t, nil, "pack", "verify", ref, "--plain-http", "--policy", pp, "--keyless-without-tlog-unsafe").wantRefusal(t, "unanchored_subject_regexp")
	// Another root does not trust the signer.
	other := newCLIKeylessCA(t, dir, "other_root.json")
	runCLI(t, nil, replaceArg(args, trPath, other.trustedRoot)...).wantRefusal(t, "untrusted_signature")
}

type certProvider []byte

func (c certProvider) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

func replaceArg(args []string, from, to string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == from {
			a = to
		}
		out[i] = a
	}
	return out
}

func TestPackHostedEgress(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref := pushCLI(t, reg.Host, writeProfile(t, t.TempDir(), "acme", true))
	// The operator's policy refuses loopback at dial time: the registry client goes through it.
	runCLI(t, nil, "pack", "pull", ref, "--egress", "hosted").wantRefusal(t, "destination_refused")
	runCLI(t, nil, "pack", "pull", ref, "--plain-http", "--egress", "hosted").wantRefusal(t, "scheme_refused")
	if r := runCLI(t, nil, "pack", "pull", ref, "--plain-http", "--egress", "hosted", "--allow-loopback"); r.code != 0 {
		t.Fatalf("hosted egress with loopback allowed: exit %d: %s", r.code, r.stderr)
	}
}

// newCLITUFRepo starts a TUF repository serving trustedRoot until the test ends and writes its
// root.json into dir under name; it returns the repository and the anchor's path.
func newCLITUFRepo(t *testing.T, dir, name string, trustedRoot []byte) (*ocitest.TUFRepo, string) {
	t.Helper()
	repo, err := ocitest.NewTUFRepo(trustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Close)
	anchor := filepath.Join(dir, name)
	if err := os.WriteFile(anchor, repo.RootJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return repo, anchor
}

// TestPackVerifyKeylessOverTUF: without --trusted-root, keyless verification fetches the trusted
// root over TUF, as cosign does: here from a self-hosted TUF repository on loopback (the default,
// public-good Sigstore's, is never contacted by tests; ociregistry's TestTUFOptionsDefault holds
// the default). Twins: a repository whose metadata another root signed is not trusted, and a
// repository named without its anchor is a usage error.
func TestPackVerifyKeylessOverTUF(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	dir := t.TempDir()
	kca := newCLIKeylessCA(t, dir, "unused_root.json")
	ref := pushCLI(t, reg.Host, writeProfile(t, dir, "acme", true))
	parsed, _ := ociregistry.ParseDigestReference(ref)
	if _, err := kca.signer(t, cliRef).Sign(context.Background(), &ociregistry.Client{PlainHTTP: true}, parsed,
		&ociregistry.Provenance{SourceRepository: cliRepo, SourceRef: cliRef, SourceRevision: cliRev, BuilderID: cliBuilder}); err != nil {
		t.Fatal(err)
	}
	repo, anchor := newCLITUFRepo(t, dir, "root.json", kca.TrustedRootJSON)
	args := []string{"pack", "verify", ref, "--plain-http", "--certificate-identity", cliSubject, "--certificate-oidc-issuer", cliIssuer,
		"--provenance-source-repo", cliRepo, "--provenance-ref", cliRef, "--keyless-without-tlog-unsafe",
		"--trusted-root-tuf-url", repo.URL, "--trusted-root-tuf-root", anchor}
	r := runCLI(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, `"subject": "`+cliSubject+`"`) || repo.Requests() == 0 ||
		!strings.Contains(r.stderr, "over TUF from "+strings.TrimPrefix(repo.URL, "http://")) {
		t.Fatalf("verify over TUF: exit %d (%d TUF requests)\n%s\n%s", r.code, repo.Requests(), r.stdout, r.stderr)
	}

	_, otherAnchor := newCLITUFRepo(t, dir, "other-root.json", kca.TrustedRootJSON)
	if r := runCLI(t, nil, replaceArg(args, anchor, otherAnchor)...); r.code != exitFailure || !strings.Contains(r.stderr, "does not verify against its anchor") {
		t.Fatalf("a repository under another anchor: exit %d: %s", r.code, r.stderr)
	}
	noAnchor := args[:len(args)-2]
	if r := runCLI(t, nil, noAnchor...); r.code != exitUsage || !strings.Contains(r.stderr, "needs --trusted-root-tuf-root") {
		t.Fatalf("a repository without its anchor: exit %d: %s", r.code, r.stderr)
	}
}

// trusted-root fetch prints the trusted root a TUF repository serves, verified against its anchor,
// in the form pack verify --trusted-root and the manager's ConfigMap read back. Twin: under another
// anchor it prints nothing and fails.
func TestTrustedRootFetch(t *testing.T) {
	dir := t.TempDir()
	kca := newCLIKeylessCA(t, dir, "unused_root.json")
	repo, anchor := newCLITUFRepo(t, dir, "root.json", kca.TrustedRootJSON)
	r := runCLI(t, nil, "trusted-root", "fetch", "--trusted-root-tuf-url", repo.URL, "--trusted-root-tuf-root", anchor)
	if r.code != 0 {
		t.Fatalf("trusted-root fetch: exit %d: %s", r.code, r.stderr)
	}
	fetched := filepath.Join(dir, "fetched.json")
	if err := os.WriteFile(fetched, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ociregistry.LoadTrustedRoot(fetched)
	if err != nil {
		t.Fatalf("the fetched trusted root does not load: %v", err)
	}
	want, err := ociregistry.LoadTrustedRoot(kca.trustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.FulcioCertificateAuthorities()) != 1 || len(got.TimestampingAuthorities()) != len(want.TimestampingAuthorities()) {
		t.Fatalf("fetched %d CAs, %d TSAs", len(got.FulcioCertificateAuthorities()), len(got.TimestampingAuthorities()))
	}
	_, otherAnchor := newCLITUFRepo(t, dir, "other-root.json", kca.TrustedRootJSON)
	if r := runCLI(t, nil, "trusted-root", "fetch", "--trusted-root-tuf-url", repo.URL, "--trusted-root-tuf-root", otherAnchor); r.code != exitFailure || r.stdout != "" {
		t.Fatalf("twin: another anchor: exit %d: %q", r.code, r.stdout)
	}
}
