package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxReviewDescriptorBytes bounds the raw descriptors (added and changed tools) and field-level
// changes an McpSnapshotReview records: 1 MiB, well under etcd's ~1.5 MiB object limit. A
// candidate beyond it is recorded without descriptors and changes, with condition Recorded=False
// reason CandidateTooLarge: never cut silently.
const MaxReviewDescriptorBytes = 1 << 20

// Condition type and reasons of an McpSnapshotReview.
const (
	// ReviewConditionRecorded is True when the review holds every descriptor and change of the
	// candidate, False (ReasonCandidateTooLarge) when they exceed MaxReviewDescriptorBytes.
	ReviewConditionRecorded = "Recorded"
	// ReasonCandidateComplete means every descriptor and change is recorded.
	ReasonCandidateComplete = "CandidateComplete"
	// ReasonCandidateTooLarge means the candidate's descriptors and changes exceed
	// MaxReviewDescriptorBytes; names, digests and classes are recorded, descriptors are not.
	ReasonCandidateTooLarge = "CandidateTooLarge"
)

// McpSnapshotReviewSpec is the candidate snapshot exactly as the operator froze it when it found
// drift, and the field-level difference against the reviewed snapshot. Written by the operator
// only; evidence for review, never authority.
type McpSnapshotReviewSpec struct {
	// DeploymentName is the ServiceDeployment (same namespace) that found the drift.
	// +kubebuilder:validation:MaxLength=253
	DeploymentName string `json:"deploymentName"`

	// ReviewedSnapshotDigest is the digest of the reviewed snapshot the candidate differs from.
	// +kubebuilder:validation:MaxLength=71
	ReviewedSnapshotDigest string `json:"reviewedSnapshotDigest"`

	// CandidateSnapshotDigest is the digest of the frozen live snapshot.
	// +kubebuilder:validation:MaxLength=71
	CandidateSnapshotDigest string `json:"candidateSnapshotDigest"`

	// ReviewedProtocolVersion is the reviewed protocol revision.
	// +kubebuilder:validation:MaxLength=10
	ReviewedProtocolVersion string `json:"reviewedProtocolVersion"`

	// ProtocolVersion is the live (candidate) protocol revision.
	// +kubebuilder:validation:MaxLength=10
	ProtocolVersion string `json:"protocolVersion"`

	// ServerInfo is the live server's self-reported identity (evidence only).
	// +optional
	ServerInfo ServerInfo `json:"serverInfo,omitempty"`

	// FrozenAt is when the operator froze the candidate.
	FrozenAt metav1.Time `json:"frozenAt"`

	// Added are the live tools the review does not know, with their raw descriptors.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=2048
	Added []ReviewTool `json:"added,omitempty"`

	// Changed are the tools whose descriptor changed, with their new raw descriptors.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=2048
	Changed []ReviewTool `json:"changed,omitempty"`

	// Removed are the names of reviewed tools the live server no longer lists.
	// +optional
	// +kubebuilder:validation:MaxItems=2048
	// +kubebuilder:validation:items:MaxLength=128
	Removed []string `json:"removed,omitempty"`

	// Diff is the per-tool field-level difference with its classes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	Diff []ReviewToolDiff `json:"diff,omitempty"`

	// Classes counts tools per drift class (text_only, schema_widened, schema_narrowed,
	// annotation_changed, new_tool, removed_tool, protocol_change, other_field).
	// +optional
	Classes map[string]int32 `json:"classes,omitempty"`
}

// ReviewTool is one candidate tool with its raw descriptor (absent when the candidate exceeded
// MaxReviewDescriptorBytes).
type ReviewTool struct {
	// Name is the remote tool name (a new tool's name is not bounded by the profile's 128
	// characters; one descriptor is at most 64 KiB).
	// +kubebuilder:validation:MaxLength=65536
	Name string `json:"name"`
	// Digest is the candidate descriptor digest.
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest"`
	// Descriptor is the raw descriptor exactly as listed by the server.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:Schemaless
	Descriptor *runtime.RawExtension `json:"descriptor,omitempty"`
}

// ReviewToolDiff is the difference of one tool.
type ReviewToolDiff struct {
	// Name is the remote tool name (a new tool's name is not bounded by the profile's 128
	// characters; one descriptor is at most 64 KiB).
	// +kubebuilder:validation:MaxLength=65536
	Name string `json:"name"`
	// Kind is "added", "removed" or "changed".
	// +kubebuilder:validation:Enum=added;removed;changed
	Kind string `json:"kind"`
	// From is the reviewed descriptor digest.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	From string `json:"from,omitempty"`
	// To is the candidate descriptor digest.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	To string `json:"to,omitempty"`
	// Classes are the tool's drift classes.
	// +kubebuilder:validation:MaxItems=16
	Classes []string `json:"classes"`
	// Changes are the field-level changes (absent when the candidate exceeded the bound).
	// +optional
	Changes []ReviewChange `json:"changes,omitempty"`
	// Warnings are snapshot warning codes with their JSON Pointers, e.g.
	// "invisible_unicode /description".
	// +optional
	Warnings []string `json:"warnings,omitempty"`
	// Flags are further evidence, e.g. "url_added".
	// +optional
	Flags []string `json:"flags,omitempty"`
}

// ReviewChange is one field-level change inside a descriptor.
type ReviewChange struct {
	// Path is the RFC 6901 JSON Pointer inside the descriptor.
	Path string `json:"path"`
	// Old is the reviewed value as JSON text; absent when the member was added.
	// +optional
	Old *string `json:"old,omitempty"`
	// New is the candidate value as JSON text; absent when the member was removed.
	// +optional
	New *string `json:"new,omitempty"`
	// Classes are the change's classes.
	Classes []string `json:"classes"`
}

// McpSnapshotReviewStatus reports whether the review is complete.
type McpSnapshotReviewStatus struct {
	// Conditions holds Recorded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// McpSnapshotReview records the candidate snapshot of a drifted ServiceDeployment for review.
// It is named after and owned by the deployment, written by the operator and deleted by it when
// the deployment matches its reviewed snapshot again. Nothing is approved here: approval is a
// new signed profile pack.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mcprev,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Candidate",type=string,JSONPath=`.spec.candidateSnapshotDigest`
// +kubebuilder:printcolumn:name="Recorded",type=string,JSONPath=`.status.conditions[?(@.type=="Recorded")].status`
// +kubebuilder:printcolumn:name="Frozen",type=date,JSONPath=`.spec.frozenAt`
type McpSnapshotReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the recorded candidate.
	Spec McpSnapshotReviewSpec `json:"spec"`
	// Status reports completeness.
	// +optional
	Status McpSnapshotReviewStatus `json:"status,omitempty"`
}

// McpSnapshotReviewList is a list of McpSnapshotReview.
//
// +kubebuilder:object:root=true
type McpSnapshotReviewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the reviews.
	Items []McpSnapshotReview `json:"items"`
}
