package controllers

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// InvokeVerb is the RBAC verb a grant must allow on servicedeployments.
const InvokeVerb = v1.InvokeVerb

// ServiceDeploymentsResource is the RBAC resource a grant must name.
const ServiceDeploymentsResource = v1.ServiceDeploymentsResource

// RulesAllowInvoke reports whether RBAC policy rules allow the verb "invoke" on the
// servicedeployments resource of group connectors.b10x.io for the named deployment, with the
// same matching Kubernetes RBAC applies (so `kubectl auth can-i` agrees): "*" matches any verb,
// group or resource, and an empty resourceNames list means every name.
func RulesAllowInvoke(rules []rbacv1.PolicyRule, name string) bool {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 && len(r.Resources) == 0 {
			continue
		}
		if !matches(r.Verbs, InvokeVerb) || !matches(r.APIGroups, v1.GroupVersion.Group) || !matches(r.Resources, ServiceDeploymentsResource) {
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
