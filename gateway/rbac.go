package gateway

// The gateway's complete RBAC, generated into config/gateway/rbac/role.yaml (ClusterRole
// gateway-role) by `make manifests`. Nothing else is needed:
//   - tokenreviews create: authenticate callers' ServiceAccount tokens;
//   - subjectaccessreviews create: authorize "invoke servicedeployments/NAME" per caller;
//   - servicedeployments, mcpserviceprofiles get/list/watch: the registry's informers;
//   - mcptrustpolicies, namespaces get/list/watch: the shared trust policy (a team's signers
//     and egress ceiling apply to the namespaces a cluster admin selected);
//   - servicedeployments patch: the re-verify annotation on live drift;
//   - secrets get, list, watch: the upstream bearer credential, read per exchange by name, and
//     the pack pull and public-key Secrets the shared resolver reads through the label-filtered
//     informer (only Secrets labelled connectors.b10x.io/credential=true are ever listed or
//     cached; app.CacheByObject);
//   - events create: the LiveDrift warning on the deployment;
//   - services get (default/kubernetes), endpointslices list, servicecidrs list: the apiserver's
//     addresses and the Service ranges, always denied as upstream destinations (the manager's
//     deny set, egress/k8sbinding.APIServerDeny).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments;mcpserviceprofiles;mcptrustpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
