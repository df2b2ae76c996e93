package envtest

// The manager writes only Secrets an McpCredential controls: the chart's ValidatingAdmissionPolicy
// (templates/secret-writes-policy.yaml) denies its ServiceAccount every other Secret write, even
// though its ClusterRole allows create, update and patch on Secrets cluster-wide.

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// installSecretWritesPolicy creates the chart's ValidatingAdmissionPolicy and its binding for a
// release named after ns.
func installSecretWritesPolicy(t *testing.T, ns string) {
	t.Helper()
	n := 0
	for _, o := range objects(t, render(t, ns, ns, nil)) {
		if k := o.GetKind(); k == "ValidatingAdmissionPolicy" || k == "ValidatingAdmissionPolicyBinding" {
			createRendered(t, o)
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the chart renders %d admission policy objects, want the policy and its binding", n)
	}
}

// mcpCredentialOwnerRefs is a controller ownerReference to McpCredential name (as the OAuth producer sets).
func mcpCredentialOwnerRefs(name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiv1.GroupVersion.String(), Kind: "McpCredential", Name: name,
		UID: types.UID("00000000-0000-0000-0000-0000000000" + "01"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

// TestManagerWritesOnlyOwnedSecrets: as the chart's manager ServiceAccount (chart RBAC and the
// chart's admission policy), updating, patching or creating a Secret no McpCredential controls
// is denied secret_not_owned, and so is taking one over by adding the ownerReference; a Secret
// an McpCredential controls is created and updated. A cluster admin's writes are untouched.
func TestManagerWritesOnlyOwnedSecrets(t *testing.T) {
	release := newNamespace(t, "secret-writes")
	sa := installChartRBAC(t, release, nil)
	installSecretWritesPolicy(t, release)
	tenant := newNamespace(t, "secret-writes-tenant")
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "db-password"}, Data: map[string][]byte{"password": []byte("tenant")}})
	mgr, err := client.New(recordedAs(release, sa, &requestLog{}), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	denied := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), k8sbinding.RefusalSecretNotOwned)
	}

	// The policy takes effect a moment after it is created: wait for the first denial, on a
	// canary Secret of the release namespace.
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "canary"}, Data: map[string][]byte{"k": []byte("v")}})
	eventually(t, storyTimeout, "the policy in force", func() error {
		sec := &corev1.Secret{}
		// The manager has no get on Secrets: read as the admin, write as the manager.
		if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: release, Name: "canary"}, sec); err != nil {
			return err
		}
		sec.Data["k"] = []byte(sec.ResourceVersion)
		if err := mgr.Update(ctx, sec); !denied(err) {
			return errString("update not denied: " + errText(err))
		}
		return nil
	})
	sec := &corev1.Secret{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: tenant, Name: "db-password"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["password"] = []byte("overwritten")
	if err := mgr.Update(ctx, sec); !denied(err) {
		t.Fatalf("update of a tenant's Secret: %v", err)
	}
	got := &corev1.Secret{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: tenant, Name: "db-password"}, got); err != nil || string(got.Data["password"]) != "tenant" {
		t.Fatalf("the tenant's Secret changed: %q %v", got.Data["password"], err)
	}
	// A merge patch, and a take-over (adding the ownerReference), are denied too.
	if err := mgr.Patch(ctx, got.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"data":{"password":"cGF0Y2hlZA=="}}`))); !denied(err) {
		t.Fatalf("patch of a tenant's Secret: %v", err)
	}
	takeover := got.DeepCopy()
	takeover.OwnerReferences = mcpCredentialOwnerRefs("oauth")
	if err := mgr.Update(ctx, takeover); !denied(err) {
		t.Fatalf("take-over of a tenant's Secret: %v", err)
	}
	if err := mgr.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "unowned"}}); !denied(err) {
		t.Fatalf("create of an unowned Secret: %v", err)
	}

	// The twin: a Secret an McpCredential controls is created and updated by the manager.
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "oauth-token", OwnerReferences: mcpCredentialOwnerRefs("oauth")},
		Data: map[string][]byte{"token": []byte("v1")}}
	if err := mgr.Create(ctx, owned); err != nil {
		t.Fatalf("create of an owned Secret: %v", err)
	}
	owned.Data["token"] = []byte("v2")
	if err := mgr.Update(ctx, owned); err != nil {
		t.Fatalf("update of an owned Secret: %v", err)
	}
	// The policy matches only the manager: a cluster admin still writes the tenant's Secret.
	got.Data["password"] = []byte("admin")
	if err := k8sClient.Update(ctx, got); err != nil {
		t.Fatalf("an admin's update was affected by the policy: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
