package controllers

import (
	"fmt"
	"strings"

	"github.com/b10x/connector-mcp/internal/activation"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bundleClaim is what one deployment holds in the bundle: its permanent provider identity, its
// endpoint authority and the operations of its Connection.
type bundleClaim struct {
	// Key is "namespace/name" of the deployment.
	Key string
	// Created orders claims: first come keeps the name.
	Created metav1.Time
	// Provider is the providerID.
	Provider string
	// Authority is the normalized endpoint (see normalizeEndpoint); empty when invalid.
	Authority string
	// Operations are "connectionRef/operationRef" keys; empty when the profile is not resolved.
	Operations []string
}

// before reports whether claim a came first: earlier creation, then key order.
func (a bundleClaim) before(b bundleClaim) bool {
	if !a.Created.Equal(&b.Created) {
		return a.Created.Before(&b.Created)
	}
	return a.Key < b.Key
}

// findCollision applies the bundle builder's collision rules to self against every other claim:
// a provider identity, an endpoint authority or an operation of a Connection belongs to the
// deployment that claimed it first; the later one is refused with a reason naming the holder
// when it is in the same namespace, and saying only "another deployment, in another namespace"
// otherwise.
func findCollision(self bundleClaim, all []bundleClaim) *activation.StageError {
	var holder *bundleClaim
	var kind activation.Outcome
	var value string
	consider := func(c *bundleClaim, k activation.Outcome, v string) {
		if holder == nil || c.before(*holder) {
			holder, kind, value = c, k, v
		}
	}
	ops := make(map[string]bool, len(self.Operations))
	for _, o := range self.Operations {
		ops[o] = true
	}
	for i := range all {
		c := &all[i]
		if c.Key == self.Key || !c.before(self) {
			continue
		}
		switch {
		case c.Provider == self.Provider:
			consider(c, activation.ProviderCollision, "providerID "+strconvQuote(self.Provider))
		case self.Authority != "" && c.Authority == self.Authority:
			consider(c, activation.AuthorityCollision, "endpoint "+strconvQuote(self.Authority))
		default:
			for _, o := range c.Operations {
				if ops[o] {
					consider(c, activation.OperationCollision, "operation "+strconvQuote(o))
					break
				}
			}
		}
	}
	if holder == nil {
		return nil
	}
	if namespaceOf(holder.Key) != namespaceOf(self.Key) {
		// Nothing of another namespace is named: not its namespace, not its deployment.
		return kind.New("%s is held by another deployment, in another namespace", value)
	}
	return kind.New("%s is held by ServiceDeployment %s", value, holder.Key)
}

// namespaceOf returns the namespace part of a "namespace/name" claim key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", clipN(s, 256)) }
