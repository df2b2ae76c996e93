package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations the OAuth producer writes on the target Secret of an McpCredential (the Secret a
// ServiceDeployment's credentialRef names). The spender (internal/k8sbinding) refuses a Secret
// whose state is not CredentialStateReady, by name.
const (
	// CredentialStateAnnotation is the producer's verdict on the access token in the Secret:
	// CredentialStateReady, or the Ready condition's reason when the token may not be spent
	// (e.g. ReauthorizationRequired). A Secret without it is a static bearer and is unaffected.
	CredentialStateAnnotation = "connectors.b10x.io/credential-state"
	// CredentialExpiryAnnotation is the access token's expiry (RFC 3339), when known.
	CredentialExpiryAnnotation = "connectors.b10x.io/credential-expiry"
	// CredentialStateReady marks a fresh access token.
	CredentialStateReady = "Ready"
	// CredentialProducerLabel names the McpCredential that produces a Secret's value: the
	// binding label (CredentialBindingLabel) on the target Secret.
	CredentialProducerLabel = CredentialBindingLabel
)

// Keys of the McpCredential's Secrets.
const (
	// CredentialTokenKey is the target Secret key the access token is written to (the
	// ServiceDeployment's credentialRef.key).
	CredentialTokenKey = "token"
	// RefreshTokenKey is the default key of the refresh token in the refresh-token Secret.
	RefreshTokenKey = "refresh_token"
	// ClientSecretKey is the default key of the client secret.
	ClientSecretKey = "client_secret"
)

// Grant modes of an McpCredential.
const (
	// GrantAuthorizationCode: a human authorized once (mcpctl login --to-secret); the manager
	// redeems the stored refresh token.
	GrantAuthorizationCode = "AuthorizationCode"
	// GrantClientCredentials: machine-to-machine; the manager obtains tokens with the client's
	// own secret.
	GrantClientCredentials = "ClientCredentials" //nolint:gosec // a grant mode name, not a credential
)

// Client registration kinds of an McpCredential.
const (
	// RegistrationPreregistered: a client id issued by the authorization server's operator.
	RegistrationPreregistered = "Preregistered"
	// RegistrationClientIDMetadataDocument: the client id is a Client ID Metadata Document URL.
	RegistrationClientIDMetadataDocument = "ClientIDMetadataDocument"
	// RegistrationDynamic: the client id came from dynamic client registration (RFC 7591) at login.
	RegistrationDynamic = "Dynamic"
)

// McpCredentialSpec names an OAuth credential for one MCP server: it is bound to both the
// protected resource and the authorization-server issuer. Secrets are named, never embedded.
// +kubebuilder:validation:XValidation:rule="self.grant != 'AuthorizationCode' || has(self.refreshTokenSecretRef)",message="refreshTokenSecretRef is required with grant AuthorizationCode"
// +kubebuilder:validation:XValidation:rule="self.grant != 'ClientCredentials' || (has(self.client.clientSecretRef) && !has(self.refreshTokenSecretRef))",message="grant ClientCredentials needs client.clientSecretRef and no refreshTokenSecretRef"
type McpCredentialSpec struct {
	// Resource is the protected resource: the MCP server URL. Tokens are requested for it
	// (RFC 8707) and its protected-resource metadata must name Issuer. The producer accepts
	// only https (plain http to a loopback address only; ResourceNotAllowed otherwise), and the
	// target Secret's allowed-hosts names its host only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['https', 'http'] && url(self).getHostname() != ''",message="resource must be an absolute http(s) URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.contains('#')",message="resource must carry no user information and no fragment"
	Resource string `json:"resource"`

	// Issuer is the authorization server's issuer identifier (RFC 8414). Tokens are obtained
	// only from its token endpoint, which must share its origin. It must be inside the
	// namespace's ceiling (the manager's --allowed-oauth-issuers and the McpTrustPolicies'
	// spec.oauth.allowedIssuers), or nothing is sent (IssuerNotAllowed).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['https', 'http'] && url(self).getHostname() != ''",message="issuer must be an absolute http(s) URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.contains('#') && !self.contains('?')",message="issuer must carry no user information, query or fragment"
	Issuer string `json:"issuer"`

	// Grant is how tokens are obtained: AuthorizationCode (refresh a human's grant) or
	// ClientCredentials (machine-to-machine).
	// +kubebuilder:default=AuthorizationCode
	// +kubebuilder:validation:Enum=AuthorizationCode;ClientCredentials
	Grant string `json:"grant"`

	// Client is the OAuth client registration.
	Client OAuthClientRegistration `json:"client"`

	// Scopes are requested with every token; a grant that lacks one makes the credential
	// InsufficientScope, naming it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9:._/-]+$`
	Scopes []string `json:"scopes,omitempty"`

	// RefreshTokenSecretRef names the Secret key holding the refresh token (grant
	// AuthorizationCode). The Secret must carry connectors.b10x.io/credential=true and
	// connectors.b10x.io/mcpcredential=<this McpCredential's name>, no allowed-hosts annotation,
	// and a controller owner reference to this McpCredential ("mcpctl login --to-secret" writes
	// it so); the manager writes rotated refresh tokens back to it, and refuses before redeeming
	// when it does not own it.
	// +optional
	RefreshTokenSecretRef *SecretKeyReference `json:"refreshTokenSecretRef,omitempty"`

	// TargetSecretName is the Secret the access token is written to, under key "token": the
	// Secret a ServiceDeployment's credentialRef names. The manager creates it (labelled
	// connectors.b10x.io/credential=true, allowed-hosts naming the resource's host) and refuses
	// to take over a Secret it did not create.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	TargetSecretName string `json:"targetSecretName"`

	// RefreshSkew is how long before expiry the token is refreshed; it overrides the manager's
	// --credential-refresh-skew.
	// +optional
	RefreshSkew *metav1.Duration `json:"refreshSkew,omitempty"`
}

// OAuthClientRegistration is the client an McpCredential presents at the token endpoint.
type OAuthClientRegistration struct {
	// Registration says where ClientID came from: Preregistered, ClientIDMetadataDocument or
	// Dynamic (a dynamic registration made at login).
	// +kubebuilder:default=Preregistered
	// +kubebuilder:validation:Enum=Preregistered;ClientIDMetadataDocument;Dynamic
	Registration string `json:"registration"`

	// ClientID is the client identifier (for ClientIDMetadataDocument, the document's https URL).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	ClientID string `json:"clientID"`

	// ClientSecretRef names the Secret key of a confidential client's secret. The Secret must
	// carry connectors.b10x.io/credential=true and connectors.b10x.io/mcpcredential=<this
	// McpCredential's name>, no allowed-hosts annotation, and no other McpCredential's owner
	// reference.
	// +optional
	ClientSecretRef *SecretKeyReference `json:"clientSecretRef,omitempty"`
}

// McpCredentialStatus is written by the manager; it never carries a token or secret.
type McpCredentialStatus struct {
	// ObservedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready (True, reason TokenFresh; False with reason
	// ReauthorizationRequired, IssuerMismatch, ResourceMismatch, InsufficientScope,
	// SecretRefused, TargetSecretConflict, IssuerNotAllowed, ResourceNotAllowed or
	// RefreshFailed), Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Expiry is when the access token in the target Secret expires.
	// +optional
	Expiry *metav1.Time `json:"expiry,omitempty"`

	// Scopes are the scopes granted to the current token.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Scopes []string `json:"scopes,omitempty"`

	// MissingScopes are the requested scopes the grant lacks (InsufficientScope).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	MissingScopes []string `json:"missingScopes,omitempty"`

	// ObservedSecretVersions are the resourceVersions of the refresh-token and client-secret
	// Secrets the conditions were decided on: a verdict that needs a human
	// (ReauthorizationRequired, IssuerMismatch, ResourceMismatch, InsufficientScope) is not
	// retried until the spec or one of these Secrets changes.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ObservedSecretVersions string `json:"observedSecretVersions,omitempty"`

	// LastRefreshTime is when a token was last obtained.
	// +optional
	LastRefreshTime *metav1.Time `json:"lastRefreshTime,omitempty"`
}

// McpCredential is an OAuth credential the manager keeps fresh for ServiceDeployments: it is the
// hosted producer of access tokens into the target Secret; the deployment's egress is only the
// spender.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpcred,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Grant",type=string,JSONPath=`.spec.grant`
// +kubebuilder:printcolumn:name="Expiry",type=date,JSONPath=`.status.expiry`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type McpCredential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the credential's binding and Secrets.
	Spec McpCredentialSpec `json:"spec"`

	// Status is the producer's observation.
	// +optional
	Status McpCredentialStatus `json:"status,omitempty"`
}

// McpCredentialList is a list of McpCredential.
//
// +kubebuilder:object:root=true
type McpCredentialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the credentials.
	Items []McpCredential `json:"items"`
}
