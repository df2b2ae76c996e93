package controllers

import (
	"context"
	"slices"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// binder returns the shared binding construction.
func (r *DeploymentReconciler) binder() *k8sbinding.Binder {
	if r.Binder != nil {
		return r.Binder
	}
	return &k8sbinding.Binder{Secrets: r.SecretReader, ConfigMaps: r.Client}
}

// bindingRequest is the k8sbinding request of sd's mcp_connection.
func bindingRequest(sd *v1.ServiceDeployment) k8sbinding.Request {
	req := k8sbinding.Request{Namespace: sd.Namespace, URL: sd.Spec.MCPConnection.URL, AllowCIDRs: sd.Spec.MCPConnection.Egress.AllowCIDRs}
	if ref := sd.Spec.MCPConnection.CredentialRef; ref != nil {
		req.Credential = &egress.CredentialRef{Name: ref.Name, Key: ref.Key}
	}
	if ref := sd.Spec.MCPConnection.CABundleRef; ref != nil {
		req.CABundle = &k8sbinding.CABundleRef{Name: ref.Name, Key: ref.Key}
	}
	return req
}

// verifyProfile: the referenced profile exists, is verified for its current generation, and
// its document resolves to the verified snapshot digest.
func (r *DeploymentReconciler) verifyProfile(ctx context.Context, p *pass) *activation.StageError {
	prof := &v1.McpServiceProfile{}
	key := types.NamespacedName{Namespace: p.sd.Namespace, Name: p.sd.Spec.ProfileRef.Name}
	// A read-only cache view (see Reconcile): the Resolver, too, treats prof as read-only.
	if err := r.Client.Get(ctx, key, prof, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return activation.ProfileNotFound.New("McpServiceProfile %q does not exist in this namespace", key.Name)
		}
		return activation.ProfileNotReady.Wrap(err, "McpServiceProfile %q could not be read", key.Name)
	}
	ready := meta.FindStatusCondition(prof.Status.Conditions, v1.ConditionReady)
	// Unseen: no status yet, in this manager's shard (its reconciler will write one), and young
	// (a profile nobody reconciles must not leave the deployment without a status for long).
	p.profileUnseen = len(prof.Status.Conditions) == 0 && prof.Status.ObservedGeneration == 0 && inShard(r.Shard, prof) &&
		p.now.Sub(prof.CreationTimestamp.Time) < profileUnseenGrace
	if ready == nil || ready.Status != metav1.ConditionTrue || prof.Status.ObservedGeneration != prof.Generation {
		if stalled := meta.FindStatusCondition(prof.Status.Conditions, v1.ConditionStalled); stalled != nil && stalled.Status == metav1.ConditionTrue &&
			prof.Status.ObservedGeneration == prof.Generation {
			return activation.ProfileRefused.New("McpServiceProfile %q is not verified (%s)", key.Name, stalled.Reason)
		}
		return activation.ProfileNotReady.New("McpServiceProfile %q is not verified", key.Name)
	}
	res, serr := r.Resolver.Resolve(ctx, prof)
	if serr != nil {
		outcome := activation.ProfileRefused
		switch {
		case serr.Transient():
			outcome = activation.ProfileNotReady
		case serr.Waiting():
			outcome = activation.ProfileWaiting
		}
		return outcome.Wrap(serr, "McpServiceProfile %q does not verify: %s", key.Name, serr.Reason())
	}
	if res.Snapshot.Digest != prof.Status.SnapshotDigest {
		return activation.ProfileNotReady.New("McpServiceProfile %q is being re-verified", key.Name)
	}
	p.resolved = res
	return nil
}

// bind runs the binding checks, the grant checks against RBAC and the collision rules.
func (r *DeploymentReconciler) bind(ctx context.Context, p *pass) *activation.StageError {
	sd, doc := p.sd, p.resolved.Document
	if serr := checkBindings(doc, &sd.Spec); serr != nil {
		return serr
	}
	var grants []string
	for _, op := range sd.Spec.Operations {
		for _, g := range op.GrantRefs {
			if !slices.Contains(grants, g) {
				grants = append(grants, g)
			}
		}
	}
	slices.Sort(grants)
	for _, g := range grants {
		if serr := r.checkGrant(ctx, sd, g); serr != nil {
			return serr
		}
	}
	if serr := checkEndpointURL("spec.mcpConnection.url", sd.Spec.MCPConnection.URL); serr != nil {
		return serr
	}
	authority, err := normalizeEndpoint(sd.Spec.MCPConnection.URL)
	if err != nil {
		return activation.EndpointRefused.New("%s", err.Error())
	}
	// The namespace's egress ceiling and the always-denied literal addresses, every pass and
	// before anything is dialed (the credential is read by the freeze stage).
	req := bindingRequest(sd)
	req.Credential = nil
	if err := r.binder().Check(ctx, req); err != nil {
		return activation.ClassifyBindingError(err)
	}
	self := r.claim(sd, authority, doc)
	// Only the claims sharing a full claim key with this one can collide with it; they come
	// from the claim index, derived once per deployment generation and profile.
	return findCollision(self, r.claims.earlierSharing(self))
}

// checkGrant checks that RoleBinding name exists in the deployment's namespace and that its
// role allows invoke on this deployment.
func (r *DeploymentReconciler) checkGrant(ctx context.Context, sd *v1.ServiceDeployment, name string) *activation.StageError {
	// Read-only cache views (see Reconcile).
	rb := &rbacv1.RoleBinding{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: name}, rb, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			// It may arrive in the same apply (its watch brings the next pass).
			return activation.GrantNotFound.New("grant RoleBinding %q does not exist in this namespace", name)
		}
		return activation.GrantUnreadable.Wrap(err, "grant RoleBinding %q could not be read", name)
	}
	var rules []rbacv1.PolicyRule
	var err error
	switch rb.RoleRef.Kind {
	case "Role":
		role := &rbacv1.Role{}
		err = r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: rb.RoleRef.Name}, role, client.UnsafeDisableDeepCopy)
		rules = role.Rules
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		err = r.Client.Get(ctx, types.NamespacedName{Name: rb.RoleRef.Name}, role, client.UnsafeDisableDeepCopy)
		rules = role.Rules
	default:
		return activation.GrantDenied.New("grant RoleBinding %q refers to an unknown role kind", name)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return activation.GrantNotFound.New("the %s %q of grant RoleBinding %q does not exist", rb.RoleRef.Kind, rb.RoleRef.Name, name)
		}
		return activation.GrantUnreadable.Wrap(err, "the role of grant RoleBinding %q could not be read", name)
	}
	if !rulesAllowInvoke(rules, sd.Name) {
		return activation.GrantDenied.New("grant RoleBinding %q does not allow verb %q on %s.%s %q", name, invokeVerb, serviceDeploymentsResource, v1.GroupVersion.Group, sd.Name)
	}
	return nil
}

// claim builds what sd holds in the bundle.
func (r *DeploymentReconciler) claim(sd *v1.ServiceDeployment, authority string, doc *v1.ProfileDocument) bundleClaim {
	c := bundleClaim{Key: sd.Namespace + "/" + sd.Name, Created: sd.CreationTimestamp, Provider: sd.Spec.ProviderID, Authority: authority}
	if doc != nil {
		for _, op := range sd.Spec.Operations {
			c.Operations = append(c.Operations, doc.Service.ConnectionRef+"/"+op.OperationRef)
		}
	}
	return c
}

// otherClaim builds another deployment's claim; its operations count only when its profile is
// verified (resolved from the memo, so a collision check never fetches a failing pack).
func (r *DeploymentReconciler) otherClaim(ctx context.Context, sd *v1.ServiceDeployment, prof *v1.McpServiceProfile) bundleClaim {
	authority, _ := normalizeEndpoint(sd.Spec.MCPConnection.URL)
	var doc *v1.ProfileDocument
	if prof != nil {
		if ready := meta.FindStatusCondition(prof.Status.Conditions, v1.ConditionReady); ready != nil && ready.Status == metav1.ConditionTrue {
			if res, serr := r.Resolver.Resolve(ctx, prof); serr == nil {
				doc = res.Document
			}
		}
	}
	return r.claim(sd, authority, doc)
}

// freeze reads the credential fingerprint and, when due, lists the live tools through egress.
func (r *DeploymentReconciler) freeze(ctx context.Context, p *pass) *activation.StageError {
	sd := p.sd
	if sd.Spec.MCPConnection.CredentialRef != nil {
		val, err := r.binder().Credential(ctx, bindingRequest(sd))
		if err != nil {
			return activation.ClassifyCredentialError(err)
		}
		if len(r.CredentialHashKey) < CredentialHashKeyMinBytes {
			clear(val)
			return activation.NoCredentialHashKey.New("the operator has no credential hash key")
		}
		p.credHash = credentialHash(r.CredentialHashKey, string(sd.UID), val)
		clear(val)
	}
	st := &sd.Status
	due, periodic := r.freezeDue(p)
	if !due {
		return nil
	}
	if periodic {
		if wait := r.HostFreezeLimit.Wait(string(sd.UID), sd.Spec.MCPConnection.URL, p.now); wait > 0 {
			// The host's allowance of periodic re-verifications is spent: this one waits for its
			// slot (the deployment keeps its verified state meanwhile, as between two intervals).
			p.hostWait = wait
			return nil
		}
	} else {
		r.HostFreezeLimit.Take(sd.Spec.MCPConnection.URL, p.now)
	}
	fctx := ctx
	if r.FreezeTimeout > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, r.FreezeTimeout)
		defer cancel()
	}
	start := time.Now()
	freq := activation.FreezeRequest{Namespace: sd.Namespace, Name: sd.Name, URL: sd.Spec.MCPConnection.URL,
		Credential: sd.Spec.MCPConnection.CredentialRef, AllowCIDRs: sd.Spec.MCPConnection.Egress.AllowCIDRs,
		CABundle: sd.Spec.MCPConnection.CABundleRef}
	live, err := r.Freezer.Freeze(fctx, freq)
	if r.Metrics != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		r.Metrics.FreezeDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		return activation.ClassifyFreezeError(freq, err)
	}
	p.live, p.froze = live, true
	t := metav1.NewTime(p.now)
	st.LastFrozenTime = &t
	st.CredentialHash = p.credHash
	st.ProfileDigest = p.resolved.ProfileDigest
	return nil
}

// freezeDue decides whether this pass must freeze the live server: never frozen, a
// re-verification requested (reverifyRequested) or due, the profile, credential or spec changed
// since the last freeze, or neither an active nor a candidate snapshot is recorded. periodic
// reports a freeze due only because the re-verification interval has passed.
func (r *DeploymentReconciler) freezeDue(p *pass) (due, periodic bool) {
	st := &p.sd.Status
	switch {
	case p.reverify,
		st.LastFrozenTime == nil,
		st.ObservedGeneration != p.sd.Generation,
		st.ProfileDigest != p.resolved.ProfileDigest,
		st.CredentialHash != p.credHash,
		st.ActiveSnapshotDigest == "" && st.CandidateSnapshotDigest == "":
		return true, false
	case r.ReverifyInterval > 0:
		due := !p.now.Before(nextVerification(st.LastFrozenTime.Time, r.ReverifyInterval, r.ReverifyJitter, string(p.sd.UID)))
		return due, due
	}
	return false, false
}

// maxReverifyRequestSkew is how far in the future a ReverifyRequestedAtAnnotation may be (clock
// skew between the requester and the manager): such a request becomes due when its time comes.
// A request further in the future is ignored, so an annotation cannot keep the reconciler
// freezing in a loop.
const maxReverifyRequestSkew = time.Minute

// reverifyRequested reads the deployment's ReverifyRequestedAtAnnotation at now: due reports a
// request newer than status.lastFrozenTime whose time has come; wait > 0 is the time until a
// request stamped slightly in the future (at most maxReverifyRequestSkew) comes due. The request
// time is rounded up to the whole second, because status.lastFrozenTime is stored in whole
// seconds: a freeze at or after the request always satisfies it. A value that is not RFC 3339
// is ignored.
func reverifyRequested(sd *v1.ServiceDeployment, now time.Time) (due bool, wait time.Duration) {
	raw, ok := sd.Annotations[v1.ReverifyRequestedAtAnnotation]
	if !ok {
		return false, 0
	}
	at, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return false, 0
	}
	if t := at.Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	}
	if last := sd.Status.LastFrozenTime; last != nil && !at.After(last.Time) {
		return false, 0
	}
	if at.After(now) {
		if at.Sub(now) > maxReverifyRequestSkew {
			return false, 0
		}
		return false, at.Sub(now)
	}
	return true, 0
}

// match compares the live snapshot (or, when no freeze was due, the recorded outcome of the last
// freeze) with the reviewed snapshot.
func (r *DeploymentReconciler) match(ctx context.Context, p *pass) *activation.StageError {
	st := &p.sd.Status
	if !p.froze {
		if st.CandidateSnapshotDigest != "" && st.Drift != nil {
			msg := "the live tool list differs from the reviewed snapshot"
			if c := meta.FindStatusCondition(st.Conditions, v1.ConditionSnapshotMatched); c != nil && c.Reason == v1.ReasonSnapshotDrift {
				msg = c.Message
			}
			return activation.SnapshotDrift.New("%s", msg)
		}
		return nil
	}
	d := decideMatch(p.resolved.Snapshot, p.live)
	if d.Matched {
		r.dropReview(ctx, p.sd)
		return nil
	}
	p.drift = &d.Diff
	st.CandidateSnapshotDigest = p.live.Digest
	st.Drift = driftStatus(d.Diff)
	r.recordReview(ctx, p)
	return activation.SnapshotDrift.New("%s; candidate %s kept for review", driftSummary(d.Diff), p.live.Digest)
}
