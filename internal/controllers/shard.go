package controllers

import (
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ShardLabel is the label the sharding documentation uses as the shard key of
// McpServiceProfiles and ServiceDeployments (e.g. --watch-label-selector
// "sharding.connectors.b10x.io/key in (shard1)"). Any label works; this one is the convention.
const ShardLabel = "sharding.connectors.b10x.io/key"

// inShard reports whether o belongs to the shard sel selects (nil: every object).
func inShard(sel labels.Selector, o client.Object) bool {
	return sel == nil || sel.Matches(labels.Set(o.GetLabels()))
}

// shardPredicate passes the events of the objects in the shard (all, with a nil selector).
func shardPredicate(sel labels.Selector) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return inShard(sel, o) })
}
