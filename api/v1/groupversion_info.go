// Package v1 contains the connectors.b10x.io/v1 API: McpServiceProfile, the reviewed, signed and
// digest-pinned description of one MCP server's tool surface, and ServiceDeployment, which binds a
// profile into service against a live endpoint.
//
// +kubebuilder:object:generate=true
// +groupName=connectors.b10x.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "connectors.b10x.io", Version: "v1"}

	// SchemeBuilder registers the types of this API with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
