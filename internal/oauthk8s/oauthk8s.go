// Package oauthk8s writes an OAuth credential obtained at a workstation into the cluster, as the
// hosted producer (the manager's McpCredential reconciler) expects it, and describes such a
// credential without any secret value. It is used by "mcpctl login --to-secret" and
// "mcpctl auth status --secret", and by the envtest story that drives the same login with a
// non-interactive browser.
package oauthk8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// OAuthSecretSuffix is appended to the target name to name the Secret holding the refresh token
// and client secret ("NAME-oauth").
const OAuthSecretSuffix = "-oauth"

// ErrNoRefreshToken reports a login whose authorization server issued no refresh token: the
// producer could not keep such a credential fresh.
var ErrNoRefreshToken = errors.New("oauthk8s: the authorization server issued no refresh token; the manager cannot keep this credential fresh")

// ErrForeignObject reports an existing object of the target names that was not written by
// mcpctl login (an McpCredential or Secret someone else owns is never overwritten).
var ErrForeignObject = errors.New("oauthk8s: an object of that name exists and was not written by mcpctl login")

// managedBy marks the objects written by Apply.
const managedBy = "mcpctl"

// Apply writes cred, obtained interactively, into namespace ns as McpCredential name whose
// access token the manager writes into Secret name (key "token"): the refresh token (and the
// client secret of a confidential client) go into Secret name+OAuthSecretSuffix, labelled
// connectors.b10x.io/credential=true and connectors.b10x.io/mcpcredential=name (the binding the
// producer requires), controlled by the McpCredential (an owner reference with its UID: the
// producer writes a rotated refresh token only into a Secret the McpCredential owns), and with no
// allowed-hosts annotation (never spent as a bearer). The access token itself is not written:
// the manager produces the first one at once. registration is an apiv1.Registration* constant.
// c's scheme must know corev1 and apiv1.
func Apply(ctx context.Context, c client.Client, ns, name string, cred *oauth.Credential, registration string, scopes []string) error {
	if cred.RefreshToken == "" {
		return ErrNoRefreshToken
	}
	// The manager writes these objects too (status, rotated refresh tokens): retry on conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return apply(ctx, c, ns, name, cred, registration, scopes)
	})
}

// apply writes the McpCredential first when it does not exist yet (the Secret's owner reference
// needs its UID), then the Secret, then the spec of an existing McpCredential (so a new login's
// spec is never produced from the previous refresh token).
func apply(ctx context.Context, c client.Client, ns, name string, cred *oauth.Credential, registration string, scopes []string) error {
	secName := name + OAuthSecretSuffix
	mc := &apiv1.McpCredential{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, mc)
	switch {
	case apierrors.IsNotFound(err):
		mc = &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	case err != nil:
		return fmt.Errorf("read McpCredential %s/%s: %s", ns, name, apierrors.ReasonForError(err))
	case mc.Labels["app.kubernetes.io/managed-by"] != managedBy:
		return ErrForeignObject
	}
	sec := &corev1.Secret{}
	err = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: secName}, sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secName}, Type: corev1.SecretTypeOpaque}
	case err != nil:
		return fmt.Errorf("read Secret %s/%s: %s", ns, secName, apierrors.ReasonForError(err))
	case sec.Labels[apiv1.CredentialBindingLabel] != name || sec.Annotations[apiv1.CredentialAllowedHostsAnnotation] != "" ||
		sec.Type == corev1.SecretTypeServiceAccountToken:
		return ErrForeignObject
	case metav1.GetControllerOf(sec) != nil && mc.UID != "" && !metav1.IsControlledBy(sec, mc):
		return ErrForeignObject // controlled by another object (e.g. an earlier McpCredential of that name)
	}

	mc.Labels = map[string]string{"app.kubernetes.io/managed-by": managedBy}
	mc.Spec = apiv1.McpCredentialSpec{
		Resource: cred.Resource, Issuer: cred.Issuer, Grant: apiv1.GrantAuthorizationCode,
		Client: apiv1.OAuthClientRegistration{Registration: registration, ClientID: cred.ClientID},
		Scopes: scopes, TargetSecretName: name, RefreshSkew: mc.Spec.RefreshSkew,
		RefreshTokenSecretRef: &apiv1.SecretKeyReference{Name: secName, Key: apiv1.RefreshTokenKey},
	}
	if cred.ClientSecret != "" {
		mc.Spec.Client.ClientSecretRef = &apiv1.SecretKeyReference{Name: secName, Key: apiv1.ClientSecretKey}
	}
	existed := mc.ResourceVersion != ""
	if !existed {
		if err := c.Create(ctx, mc); err != nil {
			return fmt.Errorf("write McpCredential %s/%s: %s", ns, name, apierrors.ReasonForError(err))
		}
	}

	if mc.UID == "" {
		return fmt.Errorf("McpCredential %s/%s has no UID to own Secret %s", ns, name, secName)
	}
	// An earlier login's Secret without an owner reference is adopted: the binding label and
	// the missing allowed-hosts say mcpctl wrote it.
	sec.OwnerReferences = slices.DeleteFunc(sec.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller })
	if err := controllerutil.SetControllerReference(mc, sec, c.Scheme()); err != nil {
		return fmt.Errorf("own Secret %s/%s: %w", ns, secName, err)
	}
	sec.Labels = map[string]string{apiv1.CredentialLabel: "true", apiv1.CredentialBindingLabel: name, "app.kubernetes.io/managed-by": managedBy}
	sec.Data = map[string][]byte{apiv1.RefreshTokenKey: []byte(cred.RefreshToken)}
	if cred.ClientSecret != "" {
		sec.Data[apiv1.ClientSecretKey] = []byte(cred.ClientSecret)
	}
	if err := createOrUpdate(ctx, c, sec); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("write Secret %s/%s: %s", ns, secName, apierrors.ReasonForError(err))
	}

	if existed {
		if err := c.Update(ctx, mc); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("write McpCredential %s/%s: %s", ns, name, apierrors.ReasonForError(err))
		}
	}
	return nil
}

func createOrUpdate(ctx context.Context, c client.Client, o client.Object) error {
	if o.GetResourceVersion() == "" {
		return c.Create(ctx, o)
	}
	return c.Update(ctx, o)
}

// Status is the description of an in-cluster OAuth credential: binding, expiry and scopes,
// never a token or secret value.
type Status struct {
	// Namespace and Name identify the McpCredential (and its target Secret).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Resource and Issuer are the binding.
	Resource string `json:"resource"`
	Issuer   string `json:"issuer"`
	// Grant is AuthorizationCode or ClientCredentials.
	Grant string `json:"grant"`
	// ClientID is the client the tokens are issued to.
	ClientID string `json:"client_id"`
	// TargetSecret is the Secret the access token is written to.
	TargetSecret string `json:"target_secret"`
	// Scopes are the granted scopes; MissingScopes the requested ones the grant lacks.
	Scopes        []string `json:"scopes"`
	MissingScopes []string `json:"missing_scopes,omitempty"`
	// Expiry is the access token's expiry, when known.
	Expiry *time.Time `json:"expiry,omitempty"`
	// Ready, Reason and Message are the Ready condition.
	Ready   bool   `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// State is the target Secret's connectors.b10x.io/credential-state ("" when absent).
	State string `json:"state,omitempty"`
}

// Describe reads McpCredential ns/name and its target Secret's annotations.
func Describe(ctx context.Context, c client.Reader, ns, name string) (*Status, error) {
	mc := &apiv1.McpCredential{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, mc); err != nil {
		return nil, fmt.Errorf("McpCredential %s/%s: %s", ns, name, apierrors.ReasonForError(err))
	}
	st := &Status{Namespace: ns, Name: name, Resource: mc.Spec.Resource, Issuer: mc.Spec.Issuer, Grant: mc.Spec.Grant,
		ClientID: mc.Spec.Client.ClientID, TargetSecret: mc.Spec.TargetSecretName, Scopes: mc.Status.Scopes,
		MissingScopes: mc.Status.MissingScopes}
	if st.Scopes == nil {
		st.Scopes = []string{}
	}
	if mc.Status.Expiry != nil {
		e := mc.Status.Expiry.UTC()
		st.Expiry = &e
	}
	if r := meta.FindStatusCondition(mc.Status.Conditions, "Ready"); r != nil {
		st.Ready, st.Reason, st.Message = r.Status == metav1.ConditionTrue, r.Reason, r.Message
	}
	var sec metav1.PartialObjectMetadata
	sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: mc.Spec.TargetSecretName}, &sec); err == nil {
		st.State = sec.Annotations[apiv1.CredentialStateAnnotation]
	}
	return st, nil
}
