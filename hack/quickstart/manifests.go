package main

import (
	"fmt"
	"strings"
)

// trustPolicyManifest is the cluster admin's McpTrustPolicy granting the team's key and reviewed
// repository and branch to the team's namespace, selected by the name label the apiserver sets
// (kubernetes.io/metadata.name), which no tenant can change (docs/trust-policy.md).
func trustPolicyManifest(publicKeyPEM []byte) string {
	return fmt.Sprintf(`apiVersion: connectors.b10x.io/v1
kind: McpTrustPolicy
metadata:
  name: team-demo
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %s}
  signers:
  - name: team-demo-key
    publicKeyPEM: |
%s
  provenance:
  - sourceRepository: %s
    sourceRef: %s
`, namespace, strings.TrimRight(indent(string(publicKeyPEM), "      "), "\n"), provRepo, provRef)
}

// demoManifest is the team's McpServiceProfile (pack by digest), the invoke grant (a Role and
// RoleBinding for the agent ServiceAccount) and the ServiceDeployment exposing every operation.
func demoManifest(packRef, serverAddr string, operationRefs []string) string {
	var ops strings.Builder
	for _, op := range operationRefs {
		fmt.Fprintf(&ops, `
  - operationRef: %s
    endpointRef: mcp_connection
    grantRefs: [agents-invoke-weather]
    expose: true`, op)
	}
	return fmt.Sprintf(`apiVersion: connectors.b10x.io/v1
kind: McpServiceProfile
metadata:
  name: weather
  namespace: %[1]s
spec:
  source:
    oci:
      ref: %[2]s
      # Optional, and only ever an added requirement: the McpTrustPolicy above is the trust.
      verify:
        provenance:
          sourceRepository: %[3]s
          sourceRef: %[4]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: invoke-weather
  namespace: %[1]s
rules:
- apiGroups: [connectors.b10x.io]
  resources: [servicedeployments]
  resourceNames: [weather]
  verbs: [invoke]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: agents-invoke-weather
  namespace: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: invoke-weather}
subjects:
- {kind: ServiceAccount, name: agent, namespace: %[1]s}
---
apiVersion: connectors.b10x.io/v1
kind: ServiceDeployment
metadata:
  name: weather
  namespace: %[1]s
spec:
  profileRef: {name: weather}
  providerID: example-weather
  mcpConnection:
    url: http://%[5]s/mcp
  operations:%[6]s
`, namespace, packRef, provRepo, provRef, serverAddr, ops.String())
}

// taggedProfileManifest names the pack by tag: the apiserver refuses it (a tag is never trusted).
func taggedProfileManifest(registry string) string {
	return fmt.Sprintf(`apiVersion: connectors.b10x.io/v1
kind: McpServiceProfile
metadata:
  name: tagged
spec:
  source:
    oci:
      ref: %s/demo/weather:latest
`, registry)
}
