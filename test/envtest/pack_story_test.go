package envtest

// User stories of the production path: profiles delivered as signed OCI packs pinned by digest,
// verified against a provenance (merge verification) policy, from an in-process registry.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

const (
	packRepo     = "git+https://github.com/acme/mcp-profiles"
	packRef      = "refs/heads/main"
	packRevision = "4f2a9c1e0b7d"
)

// packWorld is a registry, the platform's signing key (its public half in a file for the
// manager's --default-public-key and in a Secret of ns) and a reviewed profile of a live server.
type packWorld struct {
	reg     *ocitest.Registry
	client  *ociregistry.Client
	signer  *ociregistry.Signer
	doc     *apiv1.ProfileDocument
	url     string
	keyPath string
}

// trustPlatform makes w's key and the protected branch of packRepo the manager's platform trust
// source (--default-public-key, --default-source-repository, --default-source-ref), with
// provenance required.
func (w *packWorld) trustPlatform(o *managerapp.Options) {
	o.SkipProvenanceUnsafe = false
	o.DefaultPublicKeyPath = w.keyPath
	o.DefaultSourceRepository, o.DefaultSourceRef = packRepo, packRef
}

func newPackWorld(t *testing.T, ns string) *packWorld {
	w, _ := newPackWorldWithServer(t, ns)
	return w
}

// newPackWorldWithServer is newPackWorld that also returns the live server's go-sdk server, so
// the story can change its tools.
func newPackWorldWithServer(t *testing.T, ns string) (*packWorld, *mcp.Server) {
	t.Helper()
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	key := newTeamSigner(t)
	pubPEM := []byte(key.pem)
	mustCreate(t, newSecret(ns, "signing-key", "cosign.pub", key.pem))
	keyPath := filepath.Join(t.TempDir(), "platform.pub")
	if err := os.WriteFile(keyPath, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	return &packWorld{reg: reg, client: &ociregistry.Client{PlainHTTP: true}, signer: key.signer,
		doc: reviewedProfile(t, live.URL), url: live.URL, keyPath: keyPath}, srv
}

// push pushes the reviewed profile as a pack and returns its digest reference.
func (w *packWorld) push(t *testing.T, repo string) ociregistry.Reference {
	t.Helper()
	r, err := ociregistry.ParseRepository(w.reg.Host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := w.client.Push(context.Background(), r, []*apiv1.ProfileDocument{w.doc})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (w *packWorld) sign(t *testing.T, ref ociregistry.Reference, sourceRef string) {
	t.Helper()
	if _, err := w.signer.Sign(context.Background(), w.client, ref, &ociregistry.Provenance{
		SourceRepository: packRepo, SourceRef: sourceRef, SourceRevision: packRevision, BuilderID: "https://ci.example/builder"}); err != nil {
		t.Fatal(err)
	}
}

// teamSigner is a signing key: the signer and the PEM of its public half.
type teamSigner struct {
	signer *ociregistry.Signer
	pem    string
}

func newTeamSigner(t *testing.T) teamSigner {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return teamSigner{signer: &ociregistry.Signer{Keypair: kp}, pem: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

func packProfile(ns, name string, ref ociregistry.Reference, prov *apiv1.ProvenancePolicy) *apiv1.McpServiceProfile {
	return &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String(),
			Verify: &apiv1.VerifyPolicy{PublicKey: &apiv1.SecretKeyReference{Name: "signing-key", Key: "cosign.pub"}, Provenance: prov}}}}}
}

func mainPolicy() *apiv1.ProvenancePolicy {
	return &apiv1.ProvenancePolicy{SourceRepository: packRepo, SourceRef: packRef}
}

// A reviewed pack, signed with provenance from the protected branch, verifies under the
// production policy (provenance required); the deployment activates; the status records the
// pack digest, signer and source revision; re-reading it makes no registry request.
func TestStoryReviewedPackActivates(t *testing.T) {
	ns := newNamespace(t, "story-pack")
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	op := startOperator(t, ns, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	makeGrant(t, ns, "all")
	sd := newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all")
	mustCreate(t, sd)

	prof = waitObj(t, prof, storyTimeout, "pack verified", isReady[*apiv1.McpServiceProfile])
	st := prof.Status
	if st.PackDigest != ref.Digest || st.SnapshotDigest != w.doc.Snapshot.Digest || !strings.HasPrefix(st.ProfileDigest, "sha256:") ||
		st.Verified == nil || st.Verified.SourceRevision != packRevision || st.Verified.SourceRef != packRef || st.Verified.SourceRepository != packRepo {
		t.Fatalf("profile status = %+v (verified %+v)", st, st.Verified)
	}
	if kstatusOf(t, prof) != status.CurrentStatus {
		t.Fatalf("kstatus %s", kstatusOf(t, prof))
	}
	sd = waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	if sd.Status.ActiveSnapshotDigest != w.doc.Snapshot.Digest || sd.Status.ProfileDigest != st.ProfileDigest {
		t.Fatalf("deployment status = %+v", sd.Status)
	}

	// Verification is cached by (digest, policy): touching both objects reads no registry.
	waitIdle(t, op, deploymentController, profileController)
	requests := w.reg.Requests()
	before, profPasses := op.reconciles(ns+"/demo"), finishedPasses(t, profileController)
	mutate(t, prof, func(p *apiv1.McpServiceProfile) { p.Labels = map[string]string{"poke": "1"} })
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) { sd.Labels = map[string]string{"poke": "1"} })
	// The profile (its only one in the process) and the deployment each pass again.
	waitFinished(t, op, profileController, profPasses, 1, profileController)
	waitPasses(t, op, ns+"/demo", before, 1, deploymentController, profileController)
	if got := w.reg.Requests() - requests; got != 0 {
		t.Fatalf("re-reading a verified pack made %d registry requests", got)
	}
}

// Every positive case has a must-fail twin with its own reason.
func TestStoryPackRefusals(t *testing.T) {
	ns := newNamespace(t, "story-packno")
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	startOperator(t, ns, o)

	cases := []struct {
		name    string
		prepare func(t *testing.T) *apiv1.McpServiceProfile
		reason  string
		message string
	}{
		{"unsigned pack", func(t *testing.T) *apiv1.McpServiceProfile {
			return packProfile(ns, "unsigned", w.push(t, "team/unsigned"), mainPolicy())
		}, apiv1.ReasonProvenanceMissing, "missing_signature"},
		{"signed from another branch", func(t *testing.T) *apiv1.McpServiceProfile {
			ref := w.push(t, "team/branch")
			w.sign(t, ref, "refs/heads/feature")
			return packProfile(ns, "branch", ref, mainPolicy())
		}, apiv1.ReasonVerificationFailed, "wrong_source_ref"},
		{"tampered layer", func(t *testing.T) *apiv1.McpServiceProfile {
			ref := w.push(t, "team/tampered")
			w.sign(t, ref, packRef)
			pack, err := w.client.Pull(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ociregistry.ParseManifest(pack.Manifest, ociregistry.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			// Same size: the bytes, not the length, betray the tampering.
			w.reg.Tamper(m.Layers[0].Digest.String(), []byte(strings.Replace(string(pack.Layers[0]), `"effect":"read"`, `"effect":"READ"`, 1)))
			return packProfile(ns, "tampered", ref, mainPolicy())
		}, apiv1.ReasonPackInvalid, "blob_digest_mismatch"},
		{"the profile's own policy adds a requirement the pack does not meet", func(t *testing.T) *apiv1.McpServiceProfile {
			ref := w.push(t, "team/ownpolicy")
			w.sign(t, ref, packRef)
			return packProfile(ns, "ownpolicy", ref, &apiv1.ProvenancePolicy{SourceRepository: packRepo, SourceRef: "refs/heads/release"})
		}, apiv1.ReasonVerificationFailed, "profile_policy/wrong_source_ref"},
		{"signature by another key", func(t *testing.T) *apiv1.McpServiceProfile {
			ref := w.push(t, "team/otherkey")
			if _, err := newTeamSigner(t).signer.Sign(context.Background(), w.client, ref, &ociregistry.Provenance{SourceRepository: packRepo, SourceRef: packRef}); err != nil {
				t.Fatal(err)
			}
			return packProfile(ns, "otherkey", ref, mainPolicy())
		}, apiv1.ReasonVerificationFailed, "untrusted_signature"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prof := tc.prepare(t)
			mustCreate(t, prof)
			// Settled: a refusal that waits for a trust source (another key's signature) reads
			// Stalled once the wait grace period has passed; the others at once.
			prof = waitObj(t, prof, storyTimeout, "refusal "+tc.reason, func(p *apiv1.McpServiceProfile) bool {
				return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, "") && hasCondition(p, apiv1.ConditionStalled, metav1.ConditionTrue, "")
			})
			c := condOf(prof, apiv1.ConditionSourceVerified)
			if c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Fatalf("SourceVerified = %s %q, want %s containing %q", c.Reason, c.Message, tc.reason, tc.message)
			}
			if prof.Status.PackDigest != "" || prof.Status.SnapshotDigest != "" || prof.Status.Verified != nil || kstatusOf(t, prof) != status.FailedStatus {
				t.Fatalf("a refused pack left status %+v (kstatus %s)", prof.Status, kstatusOf(t, prof))
			}
		})
	}
}

// Production drift: the live server adds a tool after review; the deployment refuses with the
// diff; the team reviews the change, publishes a new signed pack digest and points the profile
// at it; the deployment re-activates on its own.
func TestStoryNewPackDigestFixesDrift(t *testing.T) {
	ns := newNamespace(t, "story-repack")
	w, srv := newPackWorldWithServer(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	o.ReverifyInterval, o.ReverifyJitter = time.Second, 0
	startOperator(t, ns, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	makeGrant(t, ns, "all")
	sd := newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])

	mcptest.SetTool(srv, &mcp.Tool{Name: "delete_repo", Description: "Delete a repository.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	sd = waitObj(t, sd, storyTimeout, "drift", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDrift)
	})
	if d := sd.Status.Drift; d == nil || len(d.Added) != 1 || d.Added[0].Name != "delete_repo" {
		t.Fatalf("drift = %+v", d)
	}

	w.doc = reviewedProfile(t, w.url)
	for i := range w.doc.Operations {
		if w.doc.Operations[i].RemoteName == "delete_repo" {
			w.doc.Operations[i].Effect = apiv1.EffectDestructive
		}
	}
	newRef := w.push(t, "team/demo")
	if newRef.Digest == ref.Digest {
		t.Fatal("the re-reviewed pack has the old digest")
	}
	w.sign(t, newRef, packRef)
	mutate(t, prof, func(p *apiv1.McpServiceProfile) { p.Spec.Source.OCI.Ref = newRef.String() })
	mutate(t, sd, func(sd *apiv1.ServiceDeployment) {
		sd.Spec.Operations = newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all").Spec.Operations
	})
	sd = waitObj(t, sd, storyTimeout, "Ready on the new pack", func(sd *apiv1.ServiceDeployment) bool {
		return isReady(sd) && sd.Status.ActiveSnapshotDigest == w.doc.Snapshot.Digest
	})
	prof = waitObj(t, prof, storyTimeout, "profile on the new pack", isReady[*apiv1.McpServiceProfile])
	if prof.Status.PackDigest != newRef.Digest || sd.Status.Drift != nil {
		t.Fatalf("profile pack %s, deployment drift %+v", prof.Status.PackDigest, sd.Status.Drift)
	}
}
