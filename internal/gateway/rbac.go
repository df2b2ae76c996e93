package gateway

// The gateway's complete RBAC, generated into config/gateway/rbac/role.yaml (ClusterRole
// gateway-role) by `make manifests`. Nothing else is needed:
//   - tokenreviews create: authenticate callers' ServiceAccount tokens;
//   - subjectaccessreviews create: authorize "invoke servicedeployments/NAME" per caller;
//   - servicedeployments, mcpserviceprofiles get/list/watch: the registry's informers;
//   - mcptrustpolicies, namespaces get/list/watch: the shared trust policy (a team's signers
//     and egress ceiling apply to the namespaces a cluster admin selected);
//   - mcpreverifyrequests create: ask the manager to re-verify on live drift (no write on any
//     ServiceDeployment);
//   - mcpapprovalrequests create, get, list and mcpapprovalrequests/status update: a call to an
//     operation that requires approval creates its request; its retry reads the request fresh
//     (get; list counts a caller's open requests) and marks it Used under its resourceVersion
//     (status update), so it runs once (docs/approval.md). The decision itself is written by
//     the approver, never by the gateway;
//   - no Secret at all: the upstream bearer and the pack pull and public-key Secrets are read by
//     name, uncached, in the deployment's namespace, only where that namespace's admin consented
//     by binding the ClusterRole <release>-gateway-credentials (secrets get) to the gateway's
//     ServiceAccount in a RoleBinding (docs/security.md); elsewhere the read is forbidden and the
//     call refused credential_consent_missing;
//   - events create: the LiveDrift warning on the deployment;
//   - services get (default/kubernetes), endpointslices list, servicecidrs list: the apiserver's
//     addresses and the Service ranges, always denied as upstream destinations (the manager's
//     deny set, internal/k8sbinding.APIServerDeny).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments;mcpserviceprofiles;mcptrustpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpreverifyrequests,verbs=create
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpapprovalrequests,verbs=get;list;create
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpapprovalrequests/status,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
