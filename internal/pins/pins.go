// Package pins holds blank imports of the pinned dependencies of DESIGN.md §2 so that
// `go mod tidy` keeps their versions while the packages that use them are being written.
// Delete it once every pinned module is imported by real code.
package pins

import (
	_ "github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sigstore/sigstore-go/pkg/verify"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/client-go/kubernetes"
	_ "oras.land/oras-go/v2"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
