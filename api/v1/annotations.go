package v1

// ReverifyRequestedAtAnnotation is the ServiceDeployment annotation that asks the manager to
// re-freeze the live server at once: its value is an RFC 3339 time, and the deployment reconciler treats a value
// newer than status.lastFrozenTime (and not in the future) as a due freeze. The gateway sets it
// when it sees live drift at call time; anyone allowed to patch the deployment may set it. It
// never changes the active snapshot by itself: the freeze compares and, on drift, refuses.
const ReverifyRequestedAtAnnotation = "connectors.b10x.io/reverify-requested-at"
