package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secret opt-in for credentials: a Secret is spent as a bearer credential only when it carries
// CredentialLabel="true" and names, in CredentialAllowedHostsAnnotation, the endpoint hosts it
// may be sent to. ServiceAccount-token Secrets are never spent.
const (
	// CredentialLabel marks a Secret as a connector-mcp credential ("true"). The operator's
	// Secret cache is filtered by this label: it never sees other Secrets.
	CredentialLabel = "connectors.b10x.io/credential"
	// CredentialAllowedHostsAnnotation is a comma-separated list of endpoint hosts (host or
	// host:port, lower case) that the Secret's value may be sent to.
	CredentialAllowedHostsAnnotation = "connectors.b10x.io/allowed-hosts"
	// CredentialBindingLabel binds a Secret to one McpCredential of its namespace: its value is
	// the McpCredential's name. The OAuth producer reads a refresh-token or client-secret Secret
	// only when it carries CredentialLabel="true" and this label naming the McpCredential (and no
	// allowed-hosts annotation: a bearer is never spent at a token endpoint), and writes a rotated
	// refresh token back only into a Secret that McpCredential also controls (owner reference).
	// "mcpctl login --to-secret" writes both. The target Secret the producer creates carries the
	// same key (CredentialProducerLabel).
	CredentialBindingLabel = "connectors.b10x.io/mcpcredential"
)

// McpTrustPolicySpec grants trust to the namespaces it selects. It is cluster-scoped: only
// cluster administrators write it, so a tenant can never grant trust from inside its namespace.
//
// The manager's own flags form the platform floor. A pack in namespace N verifies when it
// satisfies one trust source that applies to N: the platform default, or one McpTrustPolicy
// whose namespaceSelector selects N. Within one source, the signature must match one of its
// signers and the provenance one of its provenance rules. A profile's own spec.source.oci.verify
// can only add requirements on top.
type McpTrustPolicySpec struct {
	// NamespaceSelector selects the namespaces this policy applies to. An empty selector
	// selects every namespace.
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// Signers are the identities trusted to sign packs for the selected namespaces.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Signers []TrustedSigner `json:"signers,omitempty"`

	// Provenance lists the accepted merge verifications (builder, source repository, ref). A
	// pack signed by one of Signers must satisfy one of them. When empty, packs signed by these
	// signers are refused unless the manager runs with the unsafe provenance waiver.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Provenance []ProvenancePolicy `json:"provenance,omitempty"`

	// Egress is the ceiling of private ranges a ServiceDeployment in the selected namespaces
	// may open with spec.mcpConnection.egress.allowCIDRs.
	// +optional
	Egress TrustEgressCeiling `json:"egress,omitempty"`

	// OAuth is the ceiling of the authorization servers an McpCredential in the selected
	// namespaces may obtain tokens from.
	// +optional
	OAuth TrustOAuthCeiling `json:"oauth,omitempty"`

	// Approval is the approval floor of the selected namespaces.
	// +optional
	Approval TrustApprovalFloor `json:"approval,omitempty"`
}

// TrustApprovalFloor makes approval a floor a tenant cannot lower.
type TrustApprovalFloor struct {
	// RequireForDestructive makes every destructive operation of a ServiceDeployment in the
	// selected namespaces require approval, even one bound with approval: None.
	// +optional
	RequireForDestructive bool `json:"requireForDestructive,omitempty"`
}

// TrustedSigner is one signer identity: keyless (OIDC issuer + anchored subject) or a public key.
// +kubebuilder:validation:XValidation:rule="has(self.keyless) != has(self.publicKeyPEM)",message="exactly one of keyless or publicKeyPEM must be set"
type TrustedSigner struct {
	// Name identifies the signer within the policy (shown in status as the verified identity).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Keyless matches the Fulcio certificate identity. A subjectRegExp must be anchored (^...$).
	// +optional
	Keyless *KeylessIdentity `json:"keyless,omitempty"`

	// PublicKeyPEM is a PEM-encoded public key (not a secret, so it lives in the policy).
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	PublicKeyPEM string `json:"publicKeyPEM,omitempty"`
}

// TrustEgressCeiling bounds the private ranges deployments may request.
type TrustEgressCeiling struct {
	// AllowedCIDRs are the private ranges a deployment's allowCIDRs may fall within. A
	// requested range must be contained in one of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	AllowedCIDRs []string `json:"allowedCIDRs,omitempty"`
}

// TrustOAuthCeiling bounds the OAuth issuers McpCredentials may name.
type TrustOAuthCeiling struct {
	// AllowedIssuers are the issuer identifiers (RFC 8414: exact https URLs, no query or
	// fragment; plain http only to 127.0.0.1 or ::1, which the egress policy reaches only in
	// development) an McpCredential's spec.issuer may equal. The manager's
	// --allowed-oauth-issuers apply to every namespace; the union of the two is the namespace's
	// ceiling, and an issuer outside it is refused (IssuerNotAllowed) before any request.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.all(i, isURL(i) && !i.contains('@') && !i.contains('?') && !i.contains('#') && url(i).getHostname() != '' && (url(i).getScheme() == 'https' || (url(i).getScheme() == 'http' && url(i).getHostname() in ['127.0.0.1', '::1'])))",message="allowedIssuers must be https URLs (plain http only to 127.0.0.1 or ::1) with no user information, query or fragment"
	AllowedIssuers []string `json:"allowedIssuers,omitempty"`
}

// McpTrustPolicy is a cluster-scoped grant of signer trust and an egress ceiling to a set of
// namespaces, written by cluster administrators.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mcptp,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type McpTrustPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the grant.
	Spec McpTrustPolicySpec `json:"spec"`

	// Status says whether the manager accepts the grant.
	// +optional
	Status McpTrustPolicyStatus `json:"status,omitempty"`
}

// McpTrustPolicyStatus is written by the manager. An invalid namespaceSelector or signer makes
// the policy grant no signer trust, and an invalid egress range is ignored by the ceiling; the
// Ready condition names the first invalid field (never its value).
type McpTrustPolicyStatus struct {
	// ObservedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready (True, reason Valid; or False, reason
	// InvalidGrant naming the invalid field) and Stalled (True, reason InvalidGrant, while the
	// grant is invalid).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// McpTrustPolicyList is a list of McpTrustPolicy.
//
// +kubebuilder:object:root=true
type McpTrustPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the policies.
	Items []McpTrustPolicy `json:"items"`
}
