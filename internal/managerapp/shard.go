package managerapp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// ErrWatchLabelSelector is returned (wrapped) by Options.Validate and ShardSelector for a
// --watch-label-selector that does not parse.
var ErrWatchLabelSelector = errors.New("--watch-label-selector does not parse as a label selector")

// ShardSelector parses WatchLabelSelector: nil when empty (every object).
func (o *Options) ShardSelector() (labels.Selector, error) {
	if strings.TrimSpace(o.WatchLabelSelector) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.WatchLabelSelector)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWatchLabelSelector, err)
	}
	return sel, nil
}

// LeaderElectionID is the leader election lease name of a manager watching selector: the
// shards of one installation each elect their own leader (as Flux's shards do).
func LeaderElectionID(selector string) string {
	const base = "connector-mcp.connectors.b10x.io"
	if strings.TrimSpace(selector) == "" {
		return base
	}
	sum := sha256.Sum256([]byte(selector))
	return fmt.Sprintf("%x-%s", sum[:4], base)
}
