package envtest

// User story of keyless trust over TUF through the real manager (issue 24): a manager given only
// a TUF repository URL (and its root.json) fetches the keyless trusted root lazily — nothing at
// start, nothing for key-signed packs — at the first keyless pack, and keeps it. Its twin: while
// the repository is down a keyless pack reads TrustedRootUnavailable (retried, never Stalled, no
// URL and nothing the repository said in the message), and is Ready once the repository is back,
// with nobody touching it.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// tufWorld is a pack world whose platform trusts its key and the CI identity of kca, with the
// keyless trusted root served by a loopback TUF repository (its root.json in a file).
type tufWorld struct {
	*packWorld
	kca    *keylessCA
	repo   *ocitest.TUFRepo
	anchor string
}

func newTUFWorld(t *testing.T, ns string) *tufWorld {
	t.Helper()
	kca := newKeylessCA(t)
	repo, err := ocitest.NewTUFRepo(kca.TrustedRootJSON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Close)
	anchor := filepath.Join(t.TempDir(), "root.json")
	if err := os.WriteFile(anchor, repo.RootJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return &tufWorld{packWorld: newPackWorld(t, ns), kca: kca, repo: repo, anchor: anchor}
}

// options are production options (provenance required) for the platform trust of w, with the
// trusted root only from w's TUF repository. The test CA has no transparency log, so the log
// entry is waived, as in TestStoryKeylessTrust.
func (w *tufWorld) options() managerapp.Options {
	o := devOptions()
	w.trustPlatform(&o)
	o.DefaultIssuer, o.DefaultSubjectRegExp = ciIssuer, `^https://github\.com/acme/mcp-profiles/\.github/workflows/pack\.yml@refs/heads/main$`
	o.KeylessWithoutTlogUnsafe = true
	o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = w.repo.URL, w.anchor
	return o
}

// keylessPack pushes the reviewed profile to repo and signs it keyless, certified for main.
func (w *tufWorld) keylessPack(t *testing.T, repo string) ociregistry.Reference {
	t.Helper()
	ref := w.push(t, repo)
	if _, err := w.kca.signer(t, packRef).Sign(context.Background(), w.client, ref, &ociregistry.Provenance{
		SourceRepository: packRepo, SourceRef: packRef, SourceRevision: packRevision}); err != nil {
		t.Fatal(err)
	}
	return ref
}

func platformProfile(ns, name string, ref ociregistry.Reference) *apiv1.McpServiceProfile {
	return &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String()}}}}
}

// TestStoryKeylessTrustOverLocalTUF: the manager starts and verifies a key-signed pack with no
// request to the TUF repository; the first keyless pack fetches the trusted root from it and is
// Ready (platform signer default-keyless); a second keyless pack is verified with the kept root,
// with no further request.
func TestStoryKeylessTrustOverLocalTUF(t *testing.T) {
	ns := newNamespace(t, "story-tuf")
	w := newTUFWorld(t, ns)
	startOperator(t, ns, w.options())

	keyRef := w.push(t, "team/key")
	w.sign(t, keyRef, packRef)
	keyProf := platformProfile(ns, "key", keyRef)
	mustCreate(t, keyProf)
	keyProf = waitObj(t, keyProf, storyTimeout, "Ready", isReady[*apiv1.McpServiceProfile])
	if keyProf.Status.Verified == nil || keyProf.Status.Verified.Signer != "default-key" {
		t.Fatalf("key-signed pack verified as %+v", keyProf.Status.Verified)
	}
	if n := w.repo.Requests(); n != 0 {
		t.Fatalf("the manager sent %d requests to the TUF repository before any keyless pack", n)
	}

	prof := platformProfile(ns, "keyless", w.keylessPack(t, "team/keyless"))
	mustCreate(t, prof)
	prof = waitObj(t, prof, storyTimeout, "Ready", isReady[*apiv1.McpServiceProfile])
	if v := prof.Status.Verified; v == nil || v.Signer != "default-keyless" || v.Subject != ciIdentity || v.SourceRevision != packRevision {
		t.Fatalf("keyless pack verified as %+v", v)
	}
	fetched := w.repo.Requests()
	if fetched == 0 {
		t.Fatal("the keyless pack was verified without the repository's trusted root")
	}
	second := platformProfile(ns, "keyless-2", w.keylessPack(t, "team/keyless-2"))
	mustCreate(t, second)
	waitObj(t, second, storyTimeout, "Ready", isReady[*apiv1.McpServiceProfile])
	if n := w.repo.Requests(); n != fetched {
		t.Fatalf("a second keyless pack made %d more TUF requests (want the kept root)", n-fetched)
	}
}

// TestStoryKeylessTUFRepositoryDown is the twin: the repository answers 503 with a page of its
// own; the keyless profile reads TrustedRootUnavailable, Reconciling and kstatus InProgress (not
// Stalled, however long it waits), its message names the refusal and the status only. Once the
// repository is back the profile is Ready without any change to it.
func TestStoryKeylessTUFRepositoryDown(t *testing.T) {
	ns := newNamespace(t, "story-tuf-down")
	w := newTUFWorld(t, ns)
	w.repo.SetUnavailable(true)
	startOperator(t, ns, w.options())

	prof := platformProfile(ns, "keyless", w.keylessPack(t, "team/keyless"))
	mustCreate(t, prof)
	prof = waitObj(t, prof, storyTimeout, "TrustedRootUnavailable", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, apiv1.ReasonTrustedRootUnavailable) &&
			hasCondition(p, apiv1.ConditionReconciling, metav1.ConditionTrue, "")
	})
	msg := condOf(prof, apiv1.ConditionSourceVerified).Message
	if !strings.Contains(msg, "trusted_root_unavailable: http_status 503") {
		t.Fatalf("SourceVerified message %q does not name the refusal and its cause", msg)
	}
	for _, leak := range []string{"127.0.0.1", strings.TrimPrefix(w.repo.URL, "http://"), "maintenance", "hunter2"} {
		if strings.Contains(msg, leak) {
			t.Fatalf("SourceVerified message %q carries %q", msg, leak)
		}
	}
	// Retried, not a refusal: still not Stalled past the wait grace period of devOptions.
	time.Sleep(2 * time.Second)
	prof = waitObj(t, prof, storyTimeout, "still retried", func(p *apiv1.McpServiceProfile) bool { return true })
	if hasCondition(prof, apiv1.ConditionStalled, metav1.ConditionTrue, "") || kstatusOf(t, prof) != status.InProgressStatus {
		t.Fatalf("an unavailable trusted root reads %s: %+v", kstatusOf(t, prof), prof.Status.Conditions)
	}
	down := w.repo.Requests()
	if down == 0 {
		t.Fatal("the repository saw no request")
	}

	w.repo.SetUnavailable(false)
	prof = waitObj(t, prof, storyTimeout, "Ready once the repository is back", isReady[*apiv1.McpServiceProfile])
	if v := prof.Status.Verified; v == nil || v.Signer != "default-keyless" {
		t.Fatalf("keyless pack verified as %+v", v)
	}
}
