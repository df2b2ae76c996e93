package controllers

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// invokeVerb is the RBAC verb a grant must allow on servicedeployments.
const invokeVerb = v1.InvokeVerb

// serviceDeploymentsResource is the RBAC resource a grant must name.
const serviceDeploymentsResource = v1.ServiceDeploymentsResource

// rulesAllowInvoke reports whether RBAC policy rules allow the verb "invoke" on the
// servicedeployments resource of group connectors.b10x.io for the named deployment, with the
// same matching Kubernetes RBAC applies (so `kubectl auth can-i` agrees): "*" matches any verb,
// group or resource, and an empty resourceNames list means every name.
func rulesAllowInvoke(rules []rbacv1.PolicyRule, name string) bool {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 && len(r.Resources) == 0 {
			continue
		}
		if !matches(r.Verbs, invokeVerb) || !matches(r.APIGroups, v1.GroupVersion.Group) || !matches(r.Resources, serviceDeploymentsResource) {
			continue
		}
		if len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name) {
			return true
		}
	}
	return false
}

func matches(set []string, want string) bool {
	return slices.Contains(set, want) || slices.Contains(set, rbacv1.ResourceAll)
}
