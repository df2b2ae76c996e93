package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// DefaultCredentialRefreshSkew is the default of --credential-refresh-skew.
const DefaultCredentialRefreshSkew = 5 * time.Minute

// CredentialReconciler is the hosted OAuth producer: it keeps the access token of every
// McpCredential fresh in its target Secret (the Secret a ServiceDeployment's credentialRef
// names), obtaining it only from the bound issuer for the bound resource, through the egress
// port, and persisting rotated refresh tokens. It cannot be aimed by whoever writes the
// McpCredential: the issuer must be inside the namespace's ceiling (Issuers), it spends only
// Secrets bound to that McpCredential (checkBound), and it writes only Secrets that McpCredential
// owns (the target it created, the refresh-token Secret it controls). The spender (internal/k8sbinding) is unchanged; it
// refuses a Secret this reconciler marked unusable.
type CredentialReconciler struct {
	// Client reads McpCredentials and, through the manager's label-filtered cache, Secrets; it
	// writes the target and refresh-token Secrets and the status.
	Client client.Client
	// APIReader reads the refresh-token Secret uncached, just before the token is redeemed: a
	// rotated token this reconciler wrote may not be in the cache yet, and redeeming the spent one
	// it replaced answers invalid_grant (a human would have to log in again). It lists by name and
	// the opt-in label, so that, as through the label-filtered cache, a Secret that is not opted
	// in is never read. The manager's APIReader; nil means Client (tests whose Client is not a
	// cache).
	APIReader client.Reader
	// HTTPClient carries discovery and token requests: egress's guarded client (dial-time IP
	// policy, no proxy, no redirects, bounded responses). Required.
	HTTPClient *http.Client
	// Events records events whose reasons equal condition reasons. Optional.
	Events events.EventRecorder
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// RefreshSkew is how long before expiry a token is refreshed (spec.refreshSkew overrides it).
	RefreshSkew time.Duration
	// RetryInterval is the delay before retrying a transient failure.
	RetryInterval time.Duration
	// Shard selects the McpCredentials this manager keeps fresh (--watch-label-selector); nil
	// means all. Exactly one shard must own a credential: two producers refreshing one rotating
	// refresh token would each spend it, and the second would read invalid_grant.
	Shard labels.Selector
	// Issuers is the OAuth issuer ceiling (TrustPolicyIssuers in the manager: the
	// --allowed-oauth-issuers and the McpTrustPolicies' spec.oauth.allowedIssuers). An
	// McpCredential whose spec.issuer is outside it is refused, IssuerNotAllowed, before any
	// request. nil allows no issuer.
	Issuers IssuerCeiling
}

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpcredentials,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpcredentials/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch;create;update;patch

// SetupWithManager watches McpCredentials (spec changes) and the opted-in Secrets they name.
func (r *CredentialReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.McpCredential{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, shardPredicate(r.Shard))).
		Named("mcpcredential").
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bySecret)).
		Watches(&v1.McpTrustPolicy{}, handler.EnqueueRequestsFromMapFunc(r.everyCredential),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// everyCredential enqueues every McpCredential of the shard: an McpTrustPolicy changed, so an
// issuer may have entered or left a namespace's ceiling.
func (r *CredentialReconciler) everyCredential(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1.McpCredentialList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if inShard(r.Shard, &list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
		}
	}
	return out
}

// bySecret enqueues the McpCredentials of the Secret's namespace that name it.
func (r *CredentialReconciler) bySecret(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.McpCredentialList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if inShard(r.Shard, &list.Items[i]) && slices.Contains(credentialSecretNames(&list.Items[i]), o.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: list.Items[i].Name}})
		}
	}
	return out
}

func credentialSecretNames(c *v1.McpCredential) []string {
	names := []string{c.Spec.TargetSecretName}
	if c.Spec.RefreshTokenSecretRef != nil {
		names = append(names, c.Spec.RefreshTokenSecretRef.Name)
	}
	if c.Spec.Client.ClientSecretRef != nil {
		names = append(names, c.Spec.Client.ClientSecretRef.Name)
	}
	return names
}

// credOutcome is the verdict of one pass.
type credOutcome struct {
	reason    string
	message   string
	transient bool
	// state is written to the target Secret's credential-state annotation ("" leaves it).
	state   string
	expiry  time.Time
	scopes  []string
	missing []string
	// refreshed is set when a token was written in this pass.
	refreshed bool
	requeue   time.Duration
	// inputs are the Secret versions the verdict was reached on (status.observedSecretVersions).
	inputs string
}

func (r *CredentialReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// Reconcile keeps one McpCredential's token fresh and writes its status when it changes.
func (r *CredentialReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cred := &v1.McpCredential{}
	if err := r.Client.Get(ctx, req.NamespacedName, cred); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !inShard(r.Shard, cred) {
		return ctrl.Result{}, nil // another shard's manager produces it
	}
	o, err := r.produce(ctx, cred)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, cred, o); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: o.requeue}, nil
}

func (r *CredentialReconciler) skew(c *v1.McpCredential) time.Duration {
	if c.Spec.RefreshSkew != nil && c.Spec.RefreshSkew.Duration > 0 {
		return c.Spec.RefreshSkew.Duration
	}
	if r.RefreshSkew > 0 {
		return r.RefreshSkew
	}
	return DefaultCredentialRefreshSkew
}

func (r *CredentialReconciler) retry() time.Duration {
	if r.RetryInterval > 0 {
		return r.RetryInterval
	}
	return 30 * time.Second
}

// produce runs one pass: Secrets, the fresh check, discovery, the token request, the writes.
// Returned errors are API errors worth a requeue with backoff; every other failure is an outcome.
func (r *CredentialReconciler) produce(ctx context.Context, c *v1.McpCredential) (credOutcome, error) {
	now := r.now()
	target, owned, err := r.target(ctx, c)
	if err != nil {
		return credOutcome{}, err
	}
	if target != nil && !owned {
		return credOutcome{reason: v1.ReasonTargetSecretConflict,
			message: fmt.Sprintf("Secret %q exists and is not produced by this McpCredential; it is never taken over", clip(c.Spec.TargetSecretName))}, nil
	}
	// The aim first: an issuer outside the namespace's ceiling, or a resource that is not https,
	// is refused before anything is read or sent, and a token already produced is marked
	// unusable, so a revoked issuer stops being spent.
	var allowed []string
	if r.Issuers != nil {
		if allowed, err = r.Issuers.AllowedIssuers(ctx, c.Namespace); err != nil {
			return credOutcome{}, fmt.Errorf("read the OAuth issuer ceiling: %w", err)
		}
	}
	if o := checkAim(c, allowed); o != nil {
		out := r.unusable(ctx, c, target, *o, "")
		if out.reason == v1.ReasonIssuerNotAllowed {
			out.requeue = r.retry() // a trust policy may allow it
		}
		return out, nil
	}
	// Fresh: the target holds a Ready token not yet due, for this generation.
	if due, exp, fresh := refreshDue(c, target, r.skew(c), now); fresh {
		return credOutcome{reason: v1.ReasonTokenFresh, message: freshMessage(c), state: v1.CredentialStateReady,
			expiry: exp, requeue: due.Sub(now) + time.Second}, nil
	}
	client := oauth.ProducerClient{ID: c.Spec.Client.ClientID}
	var clientSec, refreshSec *corev1.Secret
	if ref := c.Spec.Client.ClientSecretRef; ref != nil {
		sec, o := r.secret(ctx, r.getCached, c, ref, roleRead, "client secret")
		if o != nil {
			return *o, nil
		}
		clientSec, client.Secret = sec, string(sec.Data[ref.Key])
	}
	var refreshToken string
	if c.Spec.Grant != v1.GrantClientCredentials {
		ref := c.Spec.RefreshTokenSecretRef
		if ref == nil {
			return credOutcome{reason: v1.ReasonSecretRefused, message: "spec.refreshTokenSecretRef is required with grant AuthorizationCode"}, nil
		}
		// Read-write: the refresh token is redeemed only when a rotated one can be written
		// back into this Secret, which this McpCredential must own.
		sec, o := r.secret(ctx, r.getOptedInUncached, c, ref, roleReadWrite, "refresh token")
		if o != nil {
			return *o, nil
		}
		refreshSec, refreshToken = sec, string(sec.Data[ref.Key])
	}
	inputs := secretVersions(refreshSec, clientSec)
	// A verdict that needs a human stands until the spec or one of its Secrets changes: no
	// token request is repeated (and no rotated refresh token written) in the meantime.
	if ready := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionReady); ready != nil && ready.Status == metav1.ConditionFalse &&
		terminalReasons[ready.Reason] && c.Status.ObservedGeneration == c.Generation && c.Status.ObservedSecretVersions == inputs {
		return credOutcome{reason: ready.Reason, message: ready.Message, missing: c.Status.MissingScopes, inputs: inputs}, nil
	}

	binding, err := oauth.DiscoverBinding(ctx, r.HTTPClient, c.Spec.Resource, c.Spec.Issuer)
	if err != nil {
		return r.unusable(ctx, c, target, tokenFailure(err), inputs), nil
	}
	var got *oauth.Credential
	if c.Spec.Grant == v1.GrantClientCredentials {
		got, err = oauth.ClientCredentials(ctx, r.HTTPClient, binding, client, c.Spec.Scopes)
	} else {
		got, err = oauth.Refresh(ctx, r.HTTPClient, binding, client, refreshToken, c.Spec.Scopes)
	}
	if err != nil {
		return r.unusable(ctx, c, target, tokenFailure(err), inputs), nil
	}
	// A rotated refresh token is persisted before anything else: the old one is spent. It is
	// written only into the Secret this McpCredential controls (checked before redeeming, and
	// again here, on the object written).
	if refreshSec != nil && got.RefreshToken != "" && got.RefreshToken != refreshToken {
		upd := refreshSec.DeepCopy()
		if !metav1.IsControlledBy(upd, c) {
			return *r.secretRefusal("refresh token", c.Spec.RefreshTokenSecretRef, RefusalOAuthRefreshSecretNotOwned), nil
		}
		upd.Data[c.Spec.RefreshTokenSecretRef.Key] = []byte(got.RefreshToken)
		if err := r.Client.Update(ctx, upd); err != nil {
			return credOutcome{}, fmt.Errorf("persist the rotated refresh token in Secret %s: %s", c.Spec.RefreshTokenSecretRef.Name, apierrors.ReasonForError(err))
		}
		inputs = secretVersions(upd, clientSec)
	}
	if missing := oauth.MissingScopes(c.Spec.Scopes, got.Scopes); len(missing) > 0 {
		// The token is not written: there is no silent escalation, a human logs in with the scope.
		o := credOutcome{reason: v1.ReasonInsufficientScope, state: v1.ReasonInsufficientScope, scopes: got.Scopes, missing: missing,
			message: "the grant lacks scope " + strings.Join(missing, " ") + "; run mcpctl login --to-secret with --scope " + strings.Join(missing, " --scope ")}
		return r.unusable(ctx, c, target, o, inputs), nil
	}
	o := credOutcome{reason: v1.ReasonTokenFresh, message: freshMessage(c),
		state: v1.CredentialStateReady, expiry: got.Expiry, scopes: got.Scopes, refreshed: true, inputs: inputs}
	if err := r.writeTarget(ctx, c, target, []byte(got.AccessToken), o); errors.Is(err, errTargetConflict) {
		return credOutcome{reason: v1.ReasonTargetSecretConflict,
			message: fmt.Sprintf("Secret %q exists and is not produced by this McpCredential; it is never taken over", clip(c.Spec.TargetSecretName))}, nil
	} else if err != nil {
		return credOutcome{}, err
	}
	if !got.Expiry.IsZero() {
		o.requeue = max(got.Expiry.Add(-r.skew(c)).Sub(now), time.Second)
	}
	return o, nil
}

// refreshDue is the pure decision whether the target Secret's token may be kept: it is fresh when
// the Secret is marked Ready with an expiry, the McpCredential's status describes its current
// generation, and now is before expiry − skew (due). A token of unknown expiry is never fresh.
func refreshDue(c *v1.McpCredential, target *corev1.Secret, skew time.Duration, now time.Time) (due, expiry time.Time, fresh bool) {
	if target == nil || c.Status.ObservedGeneration != c.Generation || target.Annotations[v1.CredentialStateAnnotation] != v1.CredentialStateReady {
		return time.Time{}, time.Time{}, false
	}
	exp, err := time.Parse(time.RFC3339, target.Annotations[v1.CredentialExpiryAnnotation])
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	due = exp.Add(-skew)
	return due, exp, now.Before(due)
}

// terminalReasons are the Ready reasons that need a human (Stalled).
var terminalReasons = map[string]bool{
	v1.ReasonReauthorizationRequired: true, v1.ReasonIssuerMismatch: true, v1.ReasonResourceMismatch: true, v1.ReasonInsufficientScope: true,
}

// secretVersions identifies the inputs of a verdict: the resourceVersions of the refresh-token
// and client-secret Secrets.
func secretVersions(refresh, clientSecret *corev1.Secret) string {
	v := func(s *corev1.Secret) string {
		if s == nil {
			return "-"
		}
		return s.ResourceVersion
	}
	return v(refresh) + "/" + v(clientSecret)
}

// errTargetConflict reports a target Secret that exists but was not created by the McpCredential
// (the label-filtered cache does not see an unlabelled one; its creation then fails).
var errTargetConflict = errors.New("target Secret exists")

func freshMessage(c *v1.McpCredential) string {
	return "a fresh access token is in Secret " + clip(c.Spec.TargetSecretName)
}

// tokenFailure maps a discovery or token error onto an outcome (reason, message, transient).
func tokenFailure(err error) credOutcome {
	var be *oauth.BindingError
	switch {
	case errors.As(err, &be) && be.What == "resource":
		return credOutcome{reason: v1.ReasonResourceMismatch, state: v1.ReasonResourceMismatch,
			message: oauth.RefusalBindingMismatch + ": the protected-resource metadata describes another resource; nothing was sent"}
	case errors.As(err, &be):
		return credOutcome{reason: v1.ReasonIssuerMismatch, state: v1.ReasonIssuerMismatch,
			message: oauth.RefusalBindingMismatch + ": " + be.What + " is not the bound issuer's; no token was requested"}
	case oauth.IsInvalidGrant(err):
		return credOutcome{reason: v1.ReasonReauthorizationRequired, state: v1.ReasonReauthorizationRequired,
			message: "the authorization server answered invalid_grant: run mcpctl login --to-secret again"}
	}
	detail := activation.RefusalText(err, "token_request_failed")
	var re *oauth.RefreshError
	if errors.As(err, &re) && re.Code != "" {
		detail = re.Code // a registered OAuth error code, never the server's description
	}
	return credOutcome{reason: v1.ReasonRefreshFailed, transient: true, message: "the token request failed: " + detail}
}

// unusable marks the target Secret (when it exists and is ours) with o's state, so the spender
// refuses it by name, and returns o with its requeue.
func (r *CredentialReconciler) unusable(ctx context.Context, c *v1.McpCredential, target *corev1.Secret, o credOutcome, inputs string) credOutcome {
	o.inputs = inputs
	if o.transient {
		o.requeue = r.retry()
		return o
	}
	if target != nil && o.state != "" && target.Annotations[v1.CredentialStateAnnotation] != o.state {
		upd := target.DeepCopy()
		upd.Annotations[v1.CredentialStateAnnotation] = o.state
		if err := r.Client.Patch(ctx, upd, client.MergeFrom(target)); err != nil {
			o.requeue = r.retry()
		}
	}
	return o
}

// target returns the target Secret (nil when absent) and whether this McpCredential owns it.
func (r *CredentialReconciler) target(ctx context.Context, c *v1.McpCredential) (*corev1.Secret, bool, error) {
	sec := &corev1.Secret{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.TargetSecretName}, sec)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return sec, sec.Labels[v1.CredentialProducerLabel] == c.Name && metav1.IsControlledBy(sec, c), nil
}

// secretGetter reads one Secret: the cache's Get, or getOptedInUncached.
type secretGetter func(ctx context.Context, key types.NamespacedName, sec *corev1.Secret) error

// getCached reads a Secret from the manager's label-filtered cache.
func (r *CredentialReconciler) getCached(ctx context.Context, key types.NamespacedName, sec *corev1.Secret) error {
	return r.Client.Get(ctx, key, sec)
}

// getOptedInUncached reads the Secret key names from the API server itself (see APIReader),
// selecting it by name and the opt-in label: a Secret without the label answers NotFound, as the
// label-filtered cache would, and is never read.
func (r *CredentialReconciler) getOptedInUncached(ctx context.Context, key types.NamespacedName, sec *corev1.Secret) error {
	if r.APIReader == nil {
		return r.getCached(ctx, key, sec)
	}
	var list corev1.SecretList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(key.Namespace),
		client.MatchingLabels{v1.CredentialLabel: "true"}, client.MatchingFields{"metadata.name": key.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		if list.Items[i].Name == key.Name {
			list.Items[i].DeepCopyInto(sec)
			return nil
		}
	}
	return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
}

// secret reads with get an opted-in Secret holding ref's key that c may use in role
// (checkBound), or returns the SecretRefused outcome naming the refusal.
func (r *CredentialReconciler) secret(ctx context.Context, get secretGetter, c *v1.McpCredential, ref *v1.SecretKeyReference, role secretRole, what string) (*corev1.Secret, *credOutcome) {
	sec := &corev1.Secret{}
	if err := get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, sec); err != nil {
		return nil, r.secretRefusal(what, ref, k8sbinding.RefusalCredentialNotOptedIn)
	}
	if name := checkBound(sec, c, role); name != "" {
		return nil, r.secretRefusal(what, ref, name)
	}
	if len(sec.Data[ref.Key]) == 0 {
		return nil, r.secretRefusal(what, ref, "key_not_found")
	}
	return sec, nil
}

// writeTarget creates or updates the target Secret: the access token under "token", opted in
// for the resource's host only, marked with the producer's state and the expiry.
func (r *CredentialReconciler) writeTarget(ctx context.Context, c *v1.McpCredential, target *corev1.Secret, token []byte, o credOutcome) error {
	host, err := allowedHost(c.Spec.Resource)
	if err != nil {
		return err
	}
	create := target == nil
	if create {
		target = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.TargetSecretName}, Type: corev1.SecretTypeOpaque}
		if err := controllerutil.SetControllerReference(c, target, r.Client.Scheme()); err != nil {
			return err
		}
	} else {
		target = target.DeepCopy()
	}
	if target.Labels == nil {
		target.Labels = map[string]string{}
	}
	if target.Annotations == nil {
		target.Annotations = map[string]string{}
	}
	target.Labels[v1.CredentialLabel] = "true"
	target.Labels[v1.CredentialProducerLabel] = c.Name
	target.Annotations[v1.CredentialAllowedHostsAnnotation] = host
	target.Annotations[v1.CredentialStateAnnotation] = o.state
	if o.expiry.IsZero() {
		delete(target.Annotations, v1.CredentialExpiryAnnotation)
	} else {
		target.Annotations[v1.CredentialExpiryAnnotation] = o.expiry.UTC().Format(time.RFC3339)
	}
	target.Data = map[string][]byte{v1.CredentialTokenKey: token}
	if create {
		err = r.Client.Create(ctx, target)
		if apierrors.IsAlreadyExists(err) {
			return errTargetConflict
		}
	} else {
		err = r.Client.Update(ctx, target)
	}
	if err != nil {
		return fmt.Errorf("write target Secret %s: %s", c.Spec.TargetSecretName, apierrors.ReasonForError(err))
	}
	return nil
}

// allowedHost is the allowed-hosts entry of a resource URL: its host, with the port when the URL
// names one.
func allowedHost(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Hostname() == "" {
		return "", errors.New("spec.resource is not an absolute URL")
	}
	return strings.ToLower(u.Host), nil
}

// credentialConditions is the pure decision of the conditions of an outcome: Ready True
// (TokenFresh) or False with the reason; Stalled True for a failure that needs a human;
// Reconciling True for one that is retried.
func credentialConditions(reason, message string, transient bool) []metav1.Condition {
	if reason == v1.ReasonTokenFresh {
		return []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason, Message: message}}
	}
	other := v1.ConditionStalled
	if transient || reason == v1.ReasonSecretRefused || reason == v1.ReasonIssuerNotAllowed {
		other = v1.ConditionReconciling
	}
	return []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message},
		{Type: other, Status: metav1.ConditionTrue, Reason: reason, Message: message},
	}
}

// writeStatus patches the status when anything observable changed (a no-op pass writes nothing).
func (r *CredentialReconciler) writeStatus(ctx context.Context, c *v1.McpCredential, o credOutcome) error {
	want := credentialConditions(o.reason, o.message, o.transient)
	var exp *metav1.Time
	if !o.expiry.IsZero() {
		exp = &metav1.Time{Time: o.expiry.UTC().Truncate(time.Second)}
	}
	before := c.DeepCopy()
	setConditions(&c.Status.Conditions, want, c.Generation)
	c.Status.ObservedGeneration = c.Generation
	c.Status.MissingScopes = o.missing
	if o.inputs != "" {
		c.Status.ObservedSecretVersions = o.inputs
	}
	if o.scopes != nil {
		c.Status.Scopes = o.scopes
	}
	if o.refreshed {
		c.Status.Expiry = exp
		c.Status.LastRefreshTime = &metav1.Time{Time: r.now().UTC().Truncate(time.Second)}
	}
	if w, err := patchStatus(ctx, r.Client, c, before, false); err != nil || w != statusWritten {
		return err
	}
	typ := corev1.EventTypeNormal
	if o.reason != v1.ReasonTokenFresh {
		typ = corev1.EventTypeWarning
		log.FromContext(ctx).Info("An McpCredential cannot produce a token", "mcpCredential", c.Name, "reason", o.reason)
	}
	if r.Events != nil {
		r.Events.Eventf(c, nil, typ, o.reason, "Produce", "%s", o.message)
	}
	return nil
}
