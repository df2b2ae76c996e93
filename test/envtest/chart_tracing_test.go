package envtest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/b10x/connector-mcp/internal/tracing"
)

// managerEnv returns the manager container's environment of a rendering.
func managerEnv(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, o := range objects(t, render(t, "prod", "prod-ns", values)) {
		if o.GetKind() != "Deployment" || o.GetName() != "prod-connector-mcp" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			vars, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			for _, v := range vars {
				vm := v.(map[string]any)
				env[vm["name"].(string)], _ = vm["value"].(string)
			}
		}
		return env
	}
	t.Fatal("no manager Deployment rendered")
	return nil
}

// TestChartTracingValues: tracing is off by default (no OTEL_* variable); tracing.* values become
// the standard variables, which the manager's tracing reads as enabled with that protocol; an
// endpoint with credentials is refused by the schema.
func TestChartTracingValues(t *testing.T) {
	for k := range managerEnv(t, nil) {
		if strings.HasPrefix(k, "OTEL_") {
			t.Errorf("default install sets %s", k)
		}
	}
	env := managerEnv(t, map[string]any{"tracing": map[string]any{"endpoint": "http://otel-collector.observability:4317",
		"protocol": "grpc", "insecure": true, "sampler": "parentbased_traceidratio", "samplerArg": "0.25"}})
	for k, want := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
		"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	c, err := tracing.ReadConfig(func(k string) string { return env[k] })
	if err != nil || !c.Enabled || c.Protocol != tracing.ProtocolGRPC {
		t.Errorf("the manager reads the chart's variables as %+v, %v", c, err)
	}
	if out, err := helmRun(t, map[string]any{"tracing": map[string]any{"endpoint": "https://user:secret@otel:4318"}}, //nolint:gosec // G101: the credential the schema must refuse
		"template", "prod", chartDir()); err == nil || !strings.Contains(out, "/tracing/endpoint") {
		t.Errorf("an endpoint with credentials was not refused by the schema: %v\n%s", err, out)
	}
}
