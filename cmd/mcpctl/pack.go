package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/netcause"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/ocipack"
)

func init() { register(newPackCmd) }

func newPackCmd(env *cliEnv) *cobra.Command {
	return groupCmd("pack", "Push, pull, sign and verify profile packs (OCI, by digest)",
		newPackPushCmd(env), newPackPullCmd(env), newPackSignCmd(env), newPackVerifyCmd(env))
}

// registryFlags are shared by every pack verb.
type registryFlags struct {
	plainHTTP      bool
	registryConfig string
	egress         egressFlags
}

func (f *registryFlags) register(fs *pflag.FlagSet) {
	f.registerRegistry(fs)
	f.egress.register(fs)
}

// registerRegistry adds the registry flags without the egress flags, for a command whose egress
// flags are registered once for the registry and the MCP server alike (serve).
func (f *registryFlags) registerRegistry(fs *pflag.FlagSet) {
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "reach a loopback registry without TLS (refused for any other host)")
	fs.StringVar(&f.registryConfig, "registry-config", "", "Docker config file with registry credentials (default $DOCKER_CONFIG/config.json or ~/.docker/config.json when present)")
}

// client returns the registry client for registry host, refusing plain HTTP off loopback.
func (f *registryFlags) client(env *cliEnv, host string) (*ociregistry.Client, error) {
	if f.plainHTTP && !ociregistry.IsLoopbackHost(host) {
		return nil, &ocipack.RefusalError{Name: ocipack.RefusalPlainHTTPNotLoopback, Path: host, Err: ocipack.ErrPlainHTTPNotLoopback}
	}
	c := &ociregistry.Client{PlainHTTP: f.plainHTTP}
	scheme := "https"
	if f.plainHTTP {
		scheme = "http"
	}
	// Always an egress client (never http.DefaultClient, which honours HTTP_PROXY and has no
	// IP policy): see egressFlags.registryHTTPClient.
	hc, err := f.egress.registryHTTPClient(&url.URL{Scheme: scheme, Host: host})
	if err != nil {
		return nil, err
	}
	c.HTTPClient = hc
	path := f.registryConfig
	if path == "" {
		if d := env.getenv("DOCKER_CONFIG"); d != "" {
			path = filepath.Join(d, "config.json")
		} else if h := env.getenv("HOME"); h != "" {
			path = filepath.Join(h, ".docker", "config.json")
		}
		if _, err := os.Stat(path); err != nil {
			path = ""
		}
	}
	if path != "" {
		b, err := readBounded(path, 1<<20)
		if err != nil {
			return nil, err
		}
		creds, err := ociregistry.CredentialsFromDockerConfigFile(path, b)
		if err != nil {
			return nil, err
		}
		c.Credentials = creds
	}
	return c, nil
}

// readProfile reads and decodes the profile document at path (YAML or JSON, at most
// ocipack.MaxProfileSize bytes); a decoding refusal names the file.
func readProfile(path string) (*apiv1.ProfileDocument, error) {
	b, err := readBounded(path, ocipack.MaxProfileSize)
	if err != nil {
		return nil, err
	}
	doc, err := ocipack.DecodeProfile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// readBounded reads a local file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the path is the user's own command-line argument
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newPackPushCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "push FILE... --to REPO",
		Short: "Pack reviewed profile documents and push them; prints REPO@sha256:DIGEST",
		Args:  cobra.ArbitraryArgs,
	}
	var rf registryFlags
	rf.register(cmd.Flags())
	to := cmd.Flags().String("to", "", "target repository REGISTRY/REPOSITORY (no tag)")
	markRequired(cmd, "to")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if *to == "" || len(args) == 0 {
			return usagef("usage: %s", cmd.UseLine())
		}
		return packPush(cmd.Context(), env, &rf, *to, args)
	})
	return cmd
}

func packPush(ctx context.Context, env *cliEnv, rf *registryFlags, to string, files []string) error {
	repo, err := ociregistry.ParseRepository(to)
	if err != nil {
		return err
	}
	var docs []*apiv1.ProfileDocument
	for _, path := range files {
		doc, err := readProfile(path)
		if err != nil {
			return err
		}
		docs = append(docs, doc)
	}
	c, err := rf.client(env, repo.Registry)
	if err != nil {
		return err
	}
	ref, err := c.Push(ctx, repo, docs)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stderr, "pushed", len(docs), "profile(s)")
	_, err = fmt.Fprintln(env.stdout, ref.String())
	return err
}

// pulledProfile is one profile of "pack pull" output.
type pulledProfile struct {
	ProfileDigest  string                 `json:"profileDigest"`
	SnapshotDigest string                 `json:"snapshotDigest"`
	ServiceRef     string                 `json:"serviceRef"`
	Document       *apiv1.ProfileDocument `json:"document,omitempty"`
}

// pullResult is the output of "pack pull".
type pullResult struct {
	Reference string          `json:"reference"`
	Profiles  []pulledProfile `json:"profiles"`
}

func newPackPullCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pull REPO@sha256:DIGEST [--output-dir DIR]",
		Short: "Pull a pack by digest and print its profiles",
		Args:  cobra.ArbitraryArgs,
	}
	var rf registryFlags
	rf.register(cmd.Flags())
	outDir := cmd.Flags().String("output-dir", "", "also write each profile as SERVICE.yaml into this existing directory, for review")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := usageArgs(cmd, args, 1, 1); err != nil {
			return err
		}
		return packPull(cmd.Context(), env, &rf, args[0], *outDir)
	})
	return cmd
}

func packPull(ctx context.Context, env *cliEnv, rf *registryFlags, arg string, outDir string) error {
	ref, err := ociregistry.ParseDigestReference(arg)
	if err != nil {
		return err
	}
	c, err := rf.client(env, ref.Registry)
	if err != nil {
		return err
	}
	p, err := c.Pull(ctx, ref)
	if err != nil {
		return err
	}
	if outDir != "" {
		for _, d := range p.Profiles {
			y, err := ocipack.EncodeProfile(d, ocipack.FormatYAML)
			if err != nil {
				return err
			}
			// Service references match ^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$ (validated): a plain file name.
			path := filepath.Join(outDir, d.Service.Ref+".yaml")
			if err := os.WriteFile(path, y, 0o644); err != nil { //nolint:gosec // G306: a reviewable document, not a secret
				return err
			}
			fmt.Fprintln(env.stderr, "wrote", path)
		}
	}
	return writeJSON(env.stdout, pullOutput(p, true))
}

func pullOutput(p *ociregistry.Pack, documents bool) pullResult {
	out := pullResult{Reference: p.Reference.String()}
	for _, d := range p.Profiles {
		pd, _ := ocipack.ProfileDigest(d)
		pp := pulledProfile{ProfileDigest: pd, SnapshotDigest: d.Snapshot.Digest, ServiceRef: d.Service.Ref}
		if documents {
			pp.Document = d
		}
		out.Profiles = append(out.Profiles, pp)
	}
	return out
}

// provenanceFlags are the --provenance-* flags of sign and verify.
type provenanceFlags struct {
	repo, ref, revision, builder string
}

func (f *provenanceFlags) register(fs *pflag.FlagSet, withRevision bool) {
	fs.StringVar(&f.repo, "provenance-source-repo", "", "source repository URI, e.g. git+https://github.com/org/repo")
	fs.StringVar(&f.ref, "provenance-ref", "", "source ref, e.g. refs/heads/main")
	fs.StringVar(&f.builder, "provenance-builder-id", "", "builder id")
	if withRevision {
		fs.StringVar(&f.revision, "provenance-revision", "", "source revision (commit)")
	}
}

func newPackSignCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sign REPO@sha256:DIGEST --key cosign.key [--provenance-source-repo URI --provenance-ref REF --provenance-revision SHA --provenance-builder-id ID]",
		Short: "Sign a pack and attach the sigstore bundle(s) as OCI referrers",
		Args:  cobra.ArbitraryArgs,
	}
	var rf registryFlags
	rf.register(cmd.Flags())
	var pf provenanceFlags
	pf.register(cmd.Flags(), true)
	key := cmd.Flags().String("key", "", "private key: cosign.key (encrypted, password from COSIGN_PASSWORD) or a PEM private key")
	markRequired(cmd, "key")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || *key == "" {
			return usagef("usage: %s", cmd.UseLine())
		}
		return packSign(cmd.Context(), env, &rf, &pf, args[0], *key)
	})
	return cmd
}

func packSign(ctx context.Context, env *cliEnv, rf *registryFlags, pf *provenanceFlags, arg, keyPath string) error {
	ref, err := ociregistry.ParseDigestReference(arg)
	if err != nil {
		return err
	}
	var prov *ociregistry.Provenance
	if pf.repo != "" || pf.ref != "" || pf.revision != "" || pf.builder != "" {
		if pf.repo == "" || pf.ref == "" {
			return usagef("--provenance-source-repo and --provenance-ref are both required for a provenance attestation")
		}
		prov = &ociregistry.Provenance{BuilderID: pf.builder, SourceRepository: pf.repo, SourceRef: pf.ref, SourceRevision: pf.revision}
	}
	pemBytes, err := readBounded(keyPath, 64<<10)
	if err != nil {
		return err
	}
	priv, err := ociregistry.LoadPrivateKey(pemBytes, []byte(env.getenv("COSIGN_PASSWORD")))
	if err != nil {
		return err
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		return err
	}
	c, err := rf.client(env, ref.Registry)
	if err != nil {
		return err
	}
	descs, err := (&ociregistry.Signer{Keypair: kp}).Sign(ctx, c, ref, prov)
	if err != nil {
		return err
	}
	out := struct {
		Reference string   `json:"reference"`
		Referrers []string `json:"referrers"`
	}{Reference: ref.String()}
	for _, d := range descs {
		out.Referrers = append(out.Referrers, d.Digest.String())
	}
	fmt.Fprintf(env.stderr, "attached %d bundle(s)\n", len(descs))
	return writeJSON(env.stdout, out)
}

// policyFile is the --policy FILE format (JSON or YAML). Paths are relative to the file.
type policyFile struct {
	// Keyless is the certificate identity (issuer + subject or subjectRegExp).
	Keyless *apiv1.KeylessIdentity `json:"keyless,omitempty"`
	// PublicKeyFile is a PEM public key (cosign.pub).
	PublicKeyFile string `json:"publicKeyFile,omitempty"`
	// TrustedRoot is a sigstore trusted_root.json.
	TrustedRoot string `json:"trustedRoot,omitempty"`
	// Provenance is the SLSA provenance policy.
	Provenance *apiv1.ProvenancePolicy `json:"provenance,omitempty"`
}

// verifyFlags are the flags of "pack verify" besides the registry and provenance flags.
type verifyFlags struct {
	key, identity, identityRE, issuer, trustedRoot, policyPath string
	tufURL, tufRoot                                            string
	skipProv, keylessWithoutTlog                               bool
	tlog                                                       int
}

// register registers the verification flags of "pack verify" (also used by "serve --pack").
func (vf *verifyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&vf.key, "key", "", "PEM public key (cosign.pub)")
	fs.StringVar(&vf.identity, "certificate-identity", "", "exact certificate subject (keyless)")
	fs.StringVar(&vf.identityRE, "certificate-identity-regexp", "", "certificate subject regular expression (keyless)")
	fs.StringVar(&vf.issuer, "certificate-oidc-issuer", "", "exact OIDC issuer (keyless)")
	fs.StringVar(&vf.trustedRoot, "trusted-root", "", "sigstore trusted_root.json (self-hosted, or an offline copy of public-good's); default for keyless: fetched over TUF")
	fs.StringVar(&vf.tufURL, "trusted-root-tuf-url", "", "TUF repository serving trusted_root.json for keyless verification (default: public-good Sigstore, "+ociregistry.PublicGoodTUFURL+")")
	fs.StringVar(&vf.tufRoot, "trusted-root-tuf-root", "", "TUF root.json anchoring --trusted-root-tuf-url (default: public-good Sigstore's root, built in)")
	fs.StringVar(&vf.policyPath, "policy", "", "policy file (JSON or YAML): keyless, publicKeyFile, trustedRoot, provenance")
	fs.BoolVar(&vf.skipProv, "skip-provenance-unsafe", false, "accept a signature without a provenance attestation (drops the merge verification)")
	fs.IntVar(&vf.tlog, "tlog-threshold", 0, "require this many verified transparency-log entries per bundle")
	fs.BoolVar(&vf.keylessWithoutTlog, "keyless-without-tlog-unsafe", false,
		"accept keyless bundles with no transparency-log entry (a signed timestamp then suffices); by default a keyless bundle needs one")
}

// fetchTrustedRoot fetches the keyless trusted root over TUF, as cosign does: from
// --trusted-root-tuf-url anchored in --trusted-root-tuf-root, or from public-good Sigstore's
// repository anchored in the root built into sigstore-go, through the egress client.
func (vf *verifyFlags) fetchTrustedRoot(env *cliEnv, eg *egressFlags) (*root.TrustedRoot, error) {
	repo := vf.tufURL
	var anchor []byte
	switch {
	case vf.tufRoot != "":
		b, err := readBounded(vf.tufRoot, 1<<20)
		if err != nil {
			return nil, err
		}
		anchor = b
	case repo != "" && repo != ociregistry.PublicGoodTUFURL:
		return nil, usagef("--trusted-root-tuf-url %s needs --trusted-root-tuf-root (the root.json it is anchored in)", repo)
	}
	if repo == "" {
		repo = ociregistry.PublicGoodTUFURL
	}
	u, err := url.Parse(repo)
	if err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !ociregistry.IsLoopbackHost(u.Host))) {
		return nil, usagef("--trusted-root-tuf-url must be an https URL (plain http only to loopback)")
	}
	hc, err := eg.registryHTTPClient(u)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(env.stderr, "fetching the keyless trusted root over TUF from %s\n", u.Host)
	tr, err := ociregistry.FetchTrustedRoot(ociregistry.TUFOptions(anchor, repo, hc))
	if err != nil {
		if c := netcause.Of(err); c != "" {
			return nil, fmt.Errorf("trusted root over TUF from %s: %s", u.Host, c)
		}
		return nil, fmt.Errorf("trusted root over TUF from %s: the repository's metadata does not verify against its anchor", u.Host)
	}
	return tr, nil
}

func newPackVerifyCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify REPO@sha256:DIGEST (--key cosign.pub | --certificate-identity[-regexp] ID --certificate-oidc-issuer URL [--trusted-root FILE | --trusted-root-tuf-url URL --trusted-root-tuf-root FILE]) [--provenance-...] [--policy FILE]",
		Short: "Verify a pack's signature and provenance against a policy, then pull it",
		Args:  cobra.ArbitraryArgs,
	}
	var rf registryFlags
	rf.register(cmd.Flags())
	var pf provenanceFlags
	pf.register(cmd.Flags(), false)
	var vf verifyFlags
	vf.register(cmd.Flags())
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := usageArgs(cmd, args, 1, 1); err != nil {
			return err
		}
		return packVerify(cmd.Context(), env, &rf, &pf, &vf, args[0])
	})
	return cmd
}

func packVerify(ctx context.Context, env *cliEnv, rf *registryFlags, pf *provenanceFlags, vf *verifyFlags, arg string) error {
	res, p, err := verifyPack(ctx, env, rf, pf, vf, arg)
	if err != nil {
		return err
	}
	out := struct {
		Verified *ociregistry.Result `json:"verified"`
		Profiles []pulledProfile     `json:"profiles"`
	}{Verified: res, Profiles: pullOutput(p, false).Profiles}
	return writeJSON(env.stdout, out)
}

// verifyPack verifies the pack arg (REPO@sha256:DIGEST) against the policy the flags and the
// --policy file name, then pulls it: the one verification of "pack verify" and "serve --pack".
func verifyPack(ctx context.Context, env *cliEnv, rf *registryFlags, pf *provenanceFlags, vf *verifyFlags, arg string) (*ociregistry.Result, *ociregistry.Pack, error) {
	key, identity, identityRE, issuer := &vf.key, &vf.identity, &vf.identityRE, &vf.issuer
	trustedRoot, policyPath, skipProv, tlog := &vf.trustedRoot, &vf.policyPath, &vf.skipProv, &vf.tlog
	ref, err := ociregistry.ParseDigestReference(arg)
	if err != nil {
		return nil, nil, err
	}
	var file policyFile
	if *policyPath != "" {
		b, err := readBounded(*policyPath, 1<<20)
		if err != nil {
			return nil, nil, err
		}
		if err := yaml.UnmarshalStrict(b, &file); err != nil {
			return nil, nil, usagef("--policy %s: %v", *policyPath, err)
		}
		base := filepath.Dir(*policyPath)
		rel := func(p string) string {
			if p == "" || filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(base, p)
		}
		file.PublicKeyFile, file.TrustedRoot = rel(file.PublicKeyFile), rel(file.TrustedRoot)
	}
	// Flags override the file.
	if *identity != "" || *identityRE != "" || *issuer != "" {
		file.Keyless = &apiv1.KeylessIdentity{Issuer: *issuer, Subject: *identity, SubjectRegExp: *identityRE}
	}
	if *key != "" {
		file.PublicKeyFile = *key
	}
	if *trustedRoot != "" {
		file.TrustedRoot = *trustedRoot
	}
	if pf.repo != "" || pf.ref != "" || pf.builder != "" {
		if file.Provenance == nil {
			file.Provenance = &apiv1.ProvenancePolicy{}
		}
		if pf.repo != "" {
			file.Provenance.SourceRepository = pf.repo
		}
		if pf.ref != "" {
			file.Provenance.SourceRef = pf.ref
		}
		if pf.builder != "" {
			file.Provenance.BuilderID = pf.builder
		}
	}
	policy := ociregistry.Policy{Keyless: file.Keyless, Provenance: file.Provenance, SkipProvenanceUnsafe: *skipProv}
	if file.PublicKeyFile != "" {
		b, err := readBounded(file.PublicKeyFile, 64<<10)
		if err != nil {
			return nil, nil, err
		}
		if policy.PublicKey, err = ociregistry.ParsePublicKey(b); err != nil {
			return nil, nil, err
		}
	}
	if err := policy.Validate(); err != nil {
		return nil, nil, err
	}
	c, err := rf.client(env, ref.Registry)
	if err != nil {
		return nil, nil, err
	}
	// Keyless verification is strict, as in the manager: an anchored subject expression, the
	// source the certificate certified, and a transparency-log entry unless waived.
	opts := []ociregistry.VerifierOption{ociregistry.WithStrictKeyless()}
	if vf.keylessWithoutTlog {
		fmt.Fprintln(env.stderr, "warning: --keyless-without-tlog-unsafe: keyless bundles without a transparency-log entry are accepted")
	} else {
		opts = append(opts, ociregistry.WithKeylessTransparencyLog(1))
	}
	if *tlog > 0 {
		opts = append(opts, ociregistry.WithTransparencyLog(*tlog))
	}
	var v *ociregistry.Verifier
	switch {
	case file.TrustedRoot != "":
		if vf.tufURL != "" || vf.tufRoot != "" {
			return nil, nil, usagef("--trusted-root and --trusted-root-tuf-url/--trusted-root-tuf-root are alternatives")
		}
		tr, err := ociregistry.LoadTrustedRoot(file.TrustedRoot)
		if err != nil {
			return nil, nil, err
		}
		v = ociregistry.NewVerifier(c, tr, opts...)
	case policy.Keyless != nil:
		tr, err := vf.fetchTrustedRoot(env, &rf.egress)
		if err != nil {
			return nil, nil, err
		}
		v = ociregistry.NewVerifier(c, tr, opts...)
	default:
		v = ociregistry.NewVerifier(c, nil, opts...)
	}
	res, p, err := v.VerifyAndPull(ctx, ref, policy)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(env.stderr, "verified", ref.String())
	return res, p, nil
}
