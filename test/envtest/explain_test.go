package envtest

import (
	"context"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// undescribed lists the paths under s (named path) whose schema has no description: what
// `kubectl explain` would show with an empty DESCRIPTION.
func undescribed(path string, s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if strings.TrimSpace(s.Description) == "" {
		out = append(out, path)
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		out = append(out, undescribed(path+"."+n, &p)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		items := *s.Items.Schema
		if items.Description == "" {
			items.Description = s.Description // kubectl explain shows the list's description for its items
		}
		out = append(out, undescribed(path+"[]", &items)...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		v := *s.AdditionalProperties.Schema
		if v.Description == "" {
			v.Description = s.Description
		}
		out = append(out, undescribed(path+"{}", &v)...)
	}
	return out
}

// TestKubectlExplainDescribesEveryField: every field of both kinds, as served by the apiserver,
// has a description (`kubectl explain mcpsp.spec...` never comes back empty).
func TestKubectlExplainDescribesEveryField(t *testing.T) {
	for _, name := range []string{"mcpserviceprofiles.connectors.b10x.io", "servicedeployments.connectors.b10x.io", "mcpcredentials.connectors.b10x.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			root := *v.Schema.OpenAPIV3Schema
			root.Description = "(root)"
			for _, top := range []string{"apiVersion", "kind", "metadata"} {
				delete(root.Properties, top) // standard fields described by Kubernetes itself
			}
			if missing := undescribed(crd.Spec.Names.Singular, &root); len(missing) > 0 {
				t.Errorf("%s %s: fields without a description:\n  %s", name, v.Name, strings.Join(missing, "\n  "))
			}
		}
	}
	if out, err := kubectlRun(t, nil, "explain", "servicedeployments.spec.suspend"); err != nil || !strings.Contains(out, "Suspend stops reconciliation") {
		t.Errorf("kubectl explain servicedeployments.spec.suspend: %v\n%s", err, out)
	}
}

// TestExplainCheckFindsGaps is the twin: a schema with one undescribed nested field is reported
// by its path.
func TestExplainCheckFindsGaps(t *testing.T) {
	s := &apiextensionsv1.JSONSchemaProps{Description: "root", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Description: "spec", Properties: map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string"}}},
	}}
	if got := undescribed("obj", s); strings.Join(got, ",") != "obj.spec.x" {
		t.Errorf("undescribed = %v, want [obj.spec.x]", got)
	}
}
