package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The RBAC attributes of approving: a person (or system) allowed ApproveVerb on
// ApprovalRequestsResource in group connectors.b10x.io, for the request's name (or all), may
// approve or deny a request, never its own (docs/approval.md).
const (
	// ApproveVerb is the RBAC verb of approving or denying an McpApprovalRequest.
	ApproveVerb = "approve"
	// ApprovalRequestsResource is the RBAC resource name of McpApprovalRequest.
	ApprovalRequestsResource = "mcpapprovalrequests"
)

// ApprovalMode says whether calls to an operation wait for an approval.
// +kubebuilder:validation:Enum=Required;None
type ApprovalMode string

const (
	// ApprovalRequired means a call creates an McpApprovalRequest and runs only once someone allowed
	// to approve it has approved that exact call.
	ApprovalRequired ApprovalMode = "Required"
	// ApprovalNone means calls run without an approval (unless an McpTrustPolicy floor says
	// otherwise for a destructive operation).
	ApprovalNone ApprovalMode = "None"
)

// ApprovalState is where an McpApprovalRequest stands.
// +kubebuilder:validation:Enum=Pending;Approved;Denied;Expired;Used
type ApprovalState string

const (
	// ApprovalPending means created by the gateway, not decided yet.
	ApprovalPending ApprovalState = "Pending"
	// ApprovalApproved means an approver approved it; the same call may run once.
	ApprovalApproved ApprovalState = "Approved"
	// ApprovalDenied means an approver denied it; the call never runs.
	ApprovalDenied ApprovalState = "Denied"
	// ApprovalExpired means it passed spec.expiresAt undecided or unused.
	ApprovalExpired ApprovalState = "Expired"
	// ApprovalUsed means the approved call ran (at most once, whatever the number of gateway replicas).
	ApprovalUsed ApprovalState = "Used"
)

// Labels of an McpApprovalRequest, set by the gateway (selectors for listing, never trusted for
// a decision: the gateway compares the spec).
const (
	// ApprovalCallerLabel carries a hash of the caller's identity (the gateway counts a caller's
	// open requests by it).
	ApprovalCallerLabel = "connectors.b10x.io/approval-caller"
	// ApprovalDeploymentLabel carries the deployment's name.
	ApprovalDeploymentLabel = "connectors.b10x.io/approval-deployment"
)

// ApprovalMetaKey is the _meta member of a tools/call request that names the approved
// McpApprovalRequest (in the deployment's namespace) the call is the retry of.
const ApprovalMetaKey = "connectors.b10x.io/approval"

// ApprovalCaller is the identity that made the call, as the apiserver authenticated its token.
type ApprovalCaller struct {
	// Username is the Kubernetes user name (system:serviceaccount:NS:NAME for a workload).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Username string `json:"username"`

	// UID is the user's UID, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
}

// ArgumentPreview is the approver's view of one top-level argument: its value as compact JSON,
// cut at a bound, or only its digest when the reviewed profile marks it sensitive.
type ArgumentPreview struct {
	// Name is the argument (top-level member) name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// Value is the value as compact JSON, at most the preview bound (absent when Sensitive).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value,omitempty"`

	// Truncated says Value was cut at the bound: it is not the whole value (Digest is).
	// +optional
	Truncated bool `json:"truncated,omitempty"`

	// Sensitive says the reviewed profile marks this argument sensitive: only Digest is shown.
	// +optional
	Sensitive bool `json:"sensitive,omitempty"`

	// Digest is sha256:<hex> over the RFC 8785 canonical form of the value.
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest"`
}

// McpApprovalRequestSpec is the exact call waiting for approval. The gateway writes it once; it
// is immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type McpApprovalRequestSpec struct {
	// DeploymentName is the ServiceDeployment (same namespace) the call was made to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DeploymentName string `json:"deploymentName"`

	// Operation is the reviewed operation reference.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Operation string `json:"operation"`

	// Effect is the reviewed effect of the operation.
	// +kubebuilder:validation:Enum=read;write;destructive
	Effect Effect `json:"effect"`

	// Caller is who made the call (the TokenReview identity). The caller can never approve it.
	Caller ApprovalCaller `json:"caller"`

	// SnapshotDigest is the frozen snapshot digest the call was made under; a re-reviewed
	// snapshot makes the request unusable.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	SnapshotDigest string `json:"snapshotDigest"`

	// ProfileDigest is the reviewed profile digest the call was made under.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ProfileDigest string `json:"profileDigest"`

	// ArgumentsDigest is sha256:<hex> over the RFC 8785 canonical form of the arguments: the
	// retry must carry arguments with the same digest.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ArgumentsDigest string `json:"argumentsDigest"`

	// ExpiresAt is when the request stops being usable, approved or not.
	ExpiresAt metav1.Time `json:"expiresAt"`

	// Preview shows the approver the arguments, bounded (sensitive arguments by digest only).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Preview []ArgumentPreview `json:"preview,omitempty"`

	// PreviewTruncated says the arguments have more members than Preview shows.
	// +optional
	PreviewTruncated bool `json:"previewTruncated,omitempty"`
}

// ApprovalDecision is who decided, and when. The admission policy (approval-decisions) lets a
// decision be written only by a user allowed ApproveVerb on this request, who is not its caller,
// and only with that user's own identity here; the gateway checks the same again before it runs
// the call.
type ApprovalDecision struct {
	// Approver is the user name of whoever decided.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Approver string `json:"approver"`

	// ApproverUID is the approver's UID, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ApproverUID string `json:"approverUID,omitempty"`

	// ApproverGroups are the approver's groups (the gateway's SubjectAccessReview of the approver
	// uses them).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	ApproverGroups []string `json:"approverGroups,omitempty"`

	// Time is when the decision was made.
	Time metav1.Time `json:"time"`

	// Reason is the approver's reason (required for a denial). Shown to approvers, never to the
	// caller.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// McpApprovalRequestStatus is the decision and its use.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == oldSelf.decision)",message="a decision is final"
// +kubebuilder:validation:XValidation:rule="!(self.state in ['Approved', 'Denied']) || has(self.decision)",message="an approval or denial records its decision"
// +kubebuilder:validation:XValidation:rule="self.state != 'Denied' || (has(self.decision) && size(self.decision.reason) > 0)",message="a denial gives a reason"
// +kubebuilder:validation:XValidation:rule="self.state != 'Used' || (has(self.decision) && has(self.usedTime))",message="only an approved request is used"
// +kubebuilder:validation:XValidation:rule="oldSelf.state == self.state || (oldSelf.state == 'Pending' && self.state in ['Approved', 'Denied', 'Expired']) || (oldSelf.state == 'Approved' && self.state in ['Used', 'Expired'])",message="state moves only Pending to Approved, Denied or Expired, and Approved to Used or Expired"
type McpApprovalRequestStatus struct {
	// State is where the request stands.
	// +kubebuilder:default=Pending
	State ApprovalState `json:"state"`

	// Decision is the approval or denial.
	// +optional
	Decision *ApprovalDecision `json:"decision,omitempty"`

	// UsedTime is when a gateway ran the approved call.
	// +optional
	UsedTime *metav1.Time `json:"usedTime,omitempty"`

	// AnnouncedState is the last state the manager recorded an Event for.
	// +optional
	AnnouncedState ApprovalState `json:"announcedState,omitempty"`
}

// McpApprovalRequest is one call of an operation that requires approval, waiting for (or holding)
// the decision of someone allowed to approve it. The gateway creates it when the call arrives
// (nothing is sent upstream) and refuses the call approval_required with its name; once approved,
// the same caller's retry of the same call (same operation, snapshot and arguments digest)
// naming it runs exactly once. See docs/approval.md.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpapproval,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=`.spec.deploymentName`
// +kubebuilder:printcolumn:name="Operation",type=string,JSONPath=`.spec.operation`
// +kubebuilder:printcolumn:name="Caller",type=string,JSONPath=`.spec.caller.username`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Approver",type=string,JSONPath=`.status.decision.approver`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type McpApprovalRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the exact call.
	Spec McpApprovalRequestSpec `json:"spec"`

	// Status is the decision.
	// +optional
	// +kubebuilder:default={state: Pending}
	Status McpApprovalRequestStatus `json:"status,omitempty"`
}

// McpApprovalRequestList is a list of McpApprovalRequest.
//
// +kubebuilder:object:root=true
type McpApprovalRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the requests.
	Items []McpApprovalRequest `json:"items"`
}

// EffectiveState is the request's state at now: Pending or Approved past spec.expiresAt read as
// Expired (the manager writes Expired soon after; readers need not wait for it).
func (r *McpApprovalRequest) EffectiveState(now metav1.Time) ApprovalState {
	st := r.Status.State
	if st == "" {
		st = ApprovalPending
	}
	if (st == ApprovalPending || st == ApprovalApproved) && !now.Before(&r.Spec.ExpiresAt) {
		return ApprovalExpired
	}
	return st
}

// RequiresApproval reports whether a call to an operation of the given reviewed effect, bound
// with mode (empty: the default), waits for an approval. The default follows the reviewed
// effect: destructive operations require approval, others do not. floor is an McpTrustPolicy's
// spec.approval.requireForDestructive for the namespace: it makes Required a floor for
// destructive operations that the deployment cannot lower with None. The server's annotations
// never take part.
func RequiresApproval(mode ApprovalMode, effect Effect, floor bool) bool {
	switch {
	case effect == EffectDestructive && floor:
		return true
	case mode == ApprovalRequired:
		return true
	case mode == ApprovalNone:
		return false
	}
	return effect == EffectDestructive
}
