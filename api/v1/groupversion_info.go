// Package v1 contains the connectors.b10x.io/v1 API: McpServiceProfile, the reviewed, signed and
// digest-pinned description of one MCP server's tool surface, and ServiceDeployment, which binds a
// profile into service against a live endpoint.
//
// +kubebuilder:object:generate=true
// +groupName=connectors.b10x.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "connectors.b10x.io", Version: "v1"}

	// SchemeBuilder registers the types of this API with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers both kinds and their lists under GroupVersion.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&McpServiceProfile{}, &McpServiceProfileList{},
		&ServiceDeployment{}, &ServiceDeploymentList{},
		&McpTrustPolicy{}, &McpTrustPolicyList{},
		&McpSnapshotReview{}, &McpSnapshotReviewList{},
		&McpCredential{}, &McpCredentialList{},
		&McpReverifyRequest{}, &McpReverifyRequestList{},
		&McpApprovalRequest{}, &McpApprovalRequestList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// The RBAC attributes of a Grant: a Grant reference names a RoleBinding whose role allows
// InvokeVerb on ServiceDeploymentsResource in group connectors.b10x.io, and every invocation is
// authorized for the same (so `kubectl auth can-i invoke servicedeployments/NAME` tells the truth).
const (
	// InvokeVerb is the RBAC verb of invoking a deployment's operations.
	InvokeVerb = "invoke"
	// ServiceDeploymentsResource is the RBAC resource name of ServiceDeployment.
	ServiceDeploymentsResource = "servicedeployments"
)
