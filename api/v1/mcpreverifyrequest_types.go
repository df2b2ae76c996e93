package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReverifyRequestMinInterval is how often, at most, McpReverifyRequests re-freeze one deployment:
// a request created less than this after the last freeze comes due this long after it. A writer
// of requests (the gateway, or whoever a namespace admin lets create them) can therefore cause no
// more than one request-driven freeze per deployment per interval.
const ReverifyRequestMinInterval = 5 * time.Second

// Reasons an McpReverifyRequest may give (spec.reason). Evidence for humans and metrics only: the
// manager handles every request alike.
const (
	// ReverifyReasonLiveDrift: the gateway saw the live tool list differ from the frozen
	// snapshot at call time.
	ReverifyReasonLiveDrift = "LiveDrift"
)

// McpReverifyRequestSpec names the deployment to re-verify.
type McpReverifyRequestSpec struct {
	// DeploymentName is the ServiceDeployment (same namespace) to re-freeze.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DeploymentName string `json:"deploymentName"`

	// Reason says why the re-verification is asked for (e.g. LiveDrift). Free text, not trusted.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_]*$`
	Reason string `json:"reason,omitempty"`
}

// McpReverifyRequest asks the manager to re-freeze one ServiceDeployment of its namespace at once,
// as the connectors.b10x.io/reverify-requested-at annotation does, without its writer needing
// patch on ServiceDeployments: the gateway may only create them. The manager treats a request
// created after the deployment's status.lastFrozenTime as a due freeze (at most once per
// ReverifyRequestMinInterval per deployment), and deletes the request once a freeze satisfied it
// or when the deployment does not exist. A request never changes the active snapshot by itself:
// the freeze compares and, on drift, refuses. Whoever can create one can cause no more than a
// rate-limited re-verification.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mcpreverify,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=`.spec.deploymentName`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type McpReverifyRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the deployment.
	Spec McpReverifyRequestSpec `json:"spec"`
}

// McpReverifyRequestList is a list of McpReverifyRequest.
//
// +kubebuilder:object:root=true
type McpReverifyRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the requests.
	Items []McpReverifyRequest `json:"items"`
}
