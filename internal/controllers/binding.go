package controllers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/b10x/connector-mcp/internal/activation"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// checkBindings runs the binding checks that need no cluster access: the deployment's operation
// set equals the profile's exactly, every operation carries endpointRef "mcp_connection", the
// exact credential reference of the connection, and at least one grant.
func checkBindings(doc *v1.ProfileDocument, spec *v1.ServiceDeploymentSpec) *activation.StageError {
	want := make(map[string]bool, len(doc.Operations))
	for _, o := range doc.Operations {
		want[o.OperationRef] = true
	}
	have := make(map[string]bool, len(spec.Operations))
	var extra []string
	for _, b := range spec.Operations {
		have[b.OperationRef] = true
		if !want[b.OperationRef] {
			extra = append(extra, b.OperationRef)
		}
	}
	var missing []string
	for _, o := range sortedKeys(want) {
		if !have[o] {
			missing = append(missing, o)
		}
	}
	if len(extra) > 0 || len(missing) > 0 {
		sort.Strings(extra)
		msg := "the operations must equal the profile's operation set exactly:"
		if len(missing) > 0 {
			msg += " missing " + quoteList(missing)
		}
		if len(extra) > 0 {
			if len(missing) > 0 {
				msg += ";"
			}
			msg += " unknown " + quoteList(extra)
		}
		return activation.OperationSetMismatch.New("%s", msg)
	}
	for _, b := range spec.Operations {
		if b.EndpointRef != v1.EndpointRefMCPConnection {
			return activation.EndpointRefInvalid.New("operation %q has endpointRef %q; it must be %q", clip(b.OperationRef), clip(b.EndpointRef), v1.EndpointRefMCPConnection)
		}
		if !sameCredential(b.CredentialRef, spec.MCPConnection.CredentialRef) {
			return activation.CredentialRefMismatch.New("operation %q must carry exactly the connection's credentialRef (%s)", clip(b.OperationRef), describeCredential(spec.MCPConnection.CredentialRef))
		}
		if len(b.GrantRefs) == 0 {
			return activation.GrantNotNamed.New("operation %q names no grant", clip(b.OperationRef))
		}
	}
	return nil
}

func sameCredential(a, b *v1.CredentialRef) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func describeCredential(c *v1.CredentialRef) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("secret %q key %q", c.Name, c.Key)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quoteList(xs []string) string {
	const max = 8
	q := make([]string, 0, len(xs))
	for i, x := range xs {
		if i == max {
			q = append(q, fmt.Sprintf("and %d more", len(xs)-max))
			break
		}
		q = append(q, fmt.Sprintf("%q", clip(x)))
	}
	return strings.Join(q, ", ")
}
