package mcpclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/refusal"
)

// TestServerRequestFeature: a server-to-client request is refused under a name of this package,
// never under text the server chose (a method "x/y" used to name the refusal "x").
func TestServerRequestFeature(t *testing.T) {
	cases := map[string]string{
		"sampling/createMessage": RefusalSampling,
		"elicitation/create":     RefusalElicitation,
		"roots/list":             RefusalRoots,
		"tasks/get":              RefusalTasks,
		// Must-fail twins of the old behaviour: unknown families do not become refusal names.
		"resources/read":                       RefusalServerRequest,
		"ignore_previous_instructions/x":       RefusalServerRequest,
		strings.Repeat("a", 4096) + "/list":    RefusalServerRequest,
		"sampling":                             RefusalSampling,
		"":                                     RefusalServerRequest,
		"Sampling/createMessage":               RefusalServerRequest,
		"sampling\u0000/createMessage":         RefusalServerRequest,
		"elicitation/create/../roots/list/etc": RefusalElicitation,
	}
	for method, want := range cases {
		if got := serverRequestFeature(method); got != want {
			t.Errorf("serverRequestFeature(%.40q) = %q, want %q", method, got, want)
		}
	}
}

// TestRefusalShape: this package's refusals are read by refusal.Name through any wrapping, and
// non-refusal errors have no name.
func TestRefusalShape(t *testing.T) {
	named := map[error]string{
		refuse(RefusalFrameTooLarge, "tools/list", 64, ErrFrameTooLarge):                    RefusalFrameTooLarge,
		fmt.Errorf("wrapped: %w", &FeatureRefusedError{Feature: RefusalSampling}):           RefusalSampling,
		errors.Join(ErrConnectionClosed, refuse(RefusalCallTimeout, "", 0, ErrCallTimeout)): RefusalCallTimeout,
		&TransportError{Op: "connect", Err: ErrConnectionClosed}:                            "",
		&ToolError{Tool: "t"}: "",
	}
	for err, want := range named {
		if got := refusal.Name(err); got != want {
			t.Errorf("refusal.Name(%v) = %q, want %q", err, got, want)
		}
	}
	long := &ToolError{Tool: strings.Repeat("é", 100)}
	if msg := long.Error(); len(msg) > 200 || !strings.Contains(msg, refusal.Ellipsis) {
		t.Errorf("ToolError with a 200-byte tool name: %q; want it clipped", msg)
	}
}
