package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// ContractV1 is the only accepted contract identity of a profile document.
const ContractV1 = "b10x.connector-mcp-service.v1"

// Effect is the reviewed, locally owned effect of an operation. It never comes from the server's
// own annotations.
// +kubebuilder:validation:Enum=read;write;destructive
type Effect string

// The reviewed effects. A draft's "unreviewed" placeholder is deliberately not among them.
const (
	// EffectRead marks an operation that only reads.
	EffectRead Effect = "read"
	// EffectWrite marks an operation that changes state in a recoverable way.
	EffectWrite Effect = "write"
	// EffectDestructive marks an operation whose changes cannot be undone.
	EffectDestructive Effect = "destructive"
	// EffectUnreviewed is the placeholder of a draft profile; it is refused everywhere a reviewed
	// profile is required (admission, pack decoding, verification).
	EffectUnreviewed Effect = "unreviewed"
)

// ProfileDocument is the reviewed description of one MCP server's tool surface. It is the content
// of a profile-pack layer (media type application/vnd.b10x.mcp-service-profile.v1+json) and of an
// inline development source: both decode to this same value.
//
// Every remote tool of the snapshot is mapped to exactly one locally owned operation, and every
// operation maps exactly one remote tool.
//
// +kubebuilder:validation:XValidation:rule="sets.contains(self.snapshot.tools.map(t, t.name), self.operations.map(o, o.remoteName))",message="every operation must map a tool of the snapshot (operations[].remoteName)"
// +kubebuilder:validation:XValidation:rule="sets.contains(self.operations.map(o, o.remoteName), self.snapshot.tools.map(t, t.name))",message="every snapshot tool must be mapped by an operation (operations[].remoteName)"
type ProfileDocument struct {
	// Contract is the contract identity; exactly "b10x.connector-mcp-service.v1".
	// +kubebuilder:validation:Enum=b10x.connector-mcp-service.v1
	Contract string `json:"contract"`

	// Service holds the stable, locally owned identity of the service and its Connection.
	Service ServiceIdentity `json:"service"`

	// Provider holds display facts about who runs the server. Display only: never used for
	// authority decisions.
	// +optional
	Provider ProviderFacts `json:"provider,omitempty"`

	// Snapshot is the complete reviewed tool snapshot: protocol, every raw descriptor and its digest.
	Snapshot RecordedSnapshot `json:"snapshot"`

	// Operations maps every remote tool name one-to-one to a locally owned operation.
	// +listType=map
	// +listMapKey=remoteName
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:XValidation:rule="self.map(o, o.operationRef).distinct().size() == self.size()",message="operationRef must be unique across operations"
	Operations []OperationMapping `json:"operations"`
}

// ServiceIdentity names the service and its Connection with stable local references.
type ServiceIdentity struct {
	// Ref is the stable reference of the service (lowercase, digits, '-', '_' and '.').
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	Ref string `json:"ref"`

	// ConnectionRef is the stable reference of the Connection callers use for this service.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	ConnectionRef string `json:"connectionRef"`
}

// ProviderFacts are display facts about the provider of the server.
type ProviderFacts struct {
	// DisplayName is the provider's human-readable name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DisplayName string `json:"displayName,omitempty"`

	// URL is the provider's homepage or documentation URL (display only, never dialed). Userinfo
	// (user:pass@) is refused: configuration names sources, never values.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="must not carry userinfo (user:pass@): configuration names sources, never values (endpoint_userinfo)",reason=FieldValueForbidden
	URL string `json:"url,omitempty"`

	// Description is a short reviewed description of the service.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description,omitempty"`
}

// RecordedSnapshot is the reviewed ToolSnapshot: the negotiated protocol revision, the server
// identity as evidence, and every raw tool descriptor exactly as received with its digest.
type RecordedSnapshot struct {
	// ProtocolVersion is the negotiated MCP protocol revision, e.g. "2026-07-28" or "2025-11-25".
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +kubebuilder:validation:MaxLength=10
	ProtocolVersion string `json:"protocolVersion"`

	// ServerInfo is the server's self-reported identity (evidence only).
	// +optional
	ServerInfo ServerInfo `json:"serverInfo,omitempty"`

	// Digest is the snapshot digest: sha256 over the RFC 8785 canonical form of
	// {protocolVersion, tools: [{name, digest}] sorted by name}.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`

	// Tools holds every remote tool descriptor with its digest.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=512
	Tools []RecordedTool `json:"tools"`
}

// ServerInfo is the server's self-reported implementation identity.
type ServerInfo struct {
	// Name is the server implementation name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// Title is the server's display title.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// Version is the server implementation version.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
}

// RecordedTool is one remote tool as reviewed.
type RecordedTool struct {
	// Name is the remote tool name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`

	// Digest is "sha256:<hex>" over the RFC 8785 canonical form of the descriptor.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`

	// Descriptor is the whole raw tool object exactly as the server listed it (annotations,
	// _meta, icons and unknown fields included). It is evidence for review, never authority.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:Schemaless
	Descriptor runtime.RawExtension `json:"descriptor"`
}

// OperationMapping maps one remote tool to a locally owned operation.
type OperationMapping struct {
	// RemoteName is the tool name on the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	RemoteName string `json:"remoteName"`

	// OperationRef is the locally owned operation reference callers use.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	OperationRef string `json:"operationRef"`

	// Title is the reviewed, locally owned title.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title"`

	// Description is the reviewed, locally owned description.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description,omitempty"`

	// Effect is the reviewed effect: read, write or destructive.
	Effect Effect `json:"effect"`

	// SensitiveArguments are top-level argument names whose values an approval request shows
	// only by digest (docs/approval.md): the reviewer marks what an approver must not read.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	SensitiveArguments []string `json:"sensitiveArguments,omitempty"`
}
