package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
)

func init() { register(newDeploymentCmd) }

func newDeploymentCmd(env *cliEnv) *cobra.Command {
	return groupCmd("deployment", "Write a ServiceDeployment for a reviewed profile (init)", newDeploymentInitCmd(env))
}

// The --expose choices of "deployment init".
const (
	exposeNonDestructive = "non-destructive"
	exposeAll            = "all"
	exposeNone           = "none"
)

// deploymentInit is what "deployment init" builds a ServiceDeployment from.
type deploymentInit struct {
	name, namespace, profileName, providerID, url string
	grants                                        []string
	secret, secretKey                             string
	expose                                        string
}

func newDeploymentInitCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init --profile FILE --grant NAME --url URL [--credential-secret NAME] [--expose non-destructive|all|none] [-o yaml|json]",
		Short: "Write a complete ServiceDeployment (YAML) binding every operation of a reviewed profile",
		Long: `Write a complete ServiceDeployment (YAML on stdout) binding every operation of a reviewed
profile document to the endpoint --url, the grants --grant (RoleBindings in the namespace whose
role allows "invoke" on the deployment) and, with --credential-secret, the bearer credential.

Operations whose reviewed effect is destructive are bound but not exposed unless --expose all;
--expose none exposes nothing. A profile with an unreviewed effect is refused (exit 3).`,
		Args: cobra.NoArgs,
	}
	var in deploymentInit
	profilePath := cmd.Flags().String("profile", "", "the reviewed profile document (YAML or JSON)")
	cmd.Flags().StringArrayVar(&in.grants, "grant", nil, "grant RoleBinding named by every operation (repeatable)")
	cmd.Flags().StringVar(&in.url, "url", "", "the MCP endpoint (https) the deployment connects to")
	cmd.Flags().StringVar(&in.name, "name", "", "the ServiceDeployment's name (default: the profile's service ref)")
	cmd.Flags().StringVarP(&in.namespace, "namespace", "n", "", "the ServiceDeployment's namespace (default: none written; kubectl's namespace applies)")
	cmd.Flags().StringVar(&in.profileName, "profile-name", "", "the McpServiceProfile's name (default: --name)")
	cmd.Flags().StringVar(&in.providerID, "provider-id", "", "the permanent provider identity (default: --name)")
	cmd.Flags().StringVar(&in.secret, "credential-secret", "", "Secret holding the bearer token (it must opt in: docs/security.md)")
	cmd.Flags().StringVar(&in.secretKey, "credential-key", "token", "key of the bearer token in --credential-secret")
	cmd.Flags().StringVar(&in.expose, "expose", exposeNonDestructive, "operations exposed: non-destructive, all or none")
	out := addOutputFlag(cmd, "yaml", formatYAML, formatJSON)
	markRequired(cmd, "profile", "grant", "url")
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		format, err := out.format()
		if err != nil {
			return err
		}
		doc, err := readProfile(*profilePath)
		if err != nil {
			return err
		}
		if _, err := ocipack.Reviewed(doc); err != nil {
			return err
		}
		sd, hidden, err := in.build(doc)
		if err != nil {
			return err
		}
		for _, op := range hidden {
			fmt.Fprintf(env.stderr, "operation %s is bound but not exposed (--expose %s)\n", op, in.expose)
		}
		if format == formatHuman {
			format = formatYAML
		}
		_, err = writeStructured(env.stdout, format, sd)
		return err
	})
	return cmd
}

// build returns the ServiceDeployment for the reviewed doc, and the operations it binds without
// exposing them. Every name is checked here, so the apiserver's refusal is never the first.
func (in *deploymentInit) build(doc *apiv1.ProfileDocument) (*apiv1.ServiceDeployment, []string, error) {
	name := in.name
	if name == "" {
		name = doc.Service.Ref
	}
	profileName, providerID := in.profileName, in.providerID
	if profileName == "" {
		profileName = name
	}
	if providerID == "" {
		providerID = name
	}
	for flag, v := range map[string]string{"--name": name, "--profile-name": profileName, "--provider-id": providerID} {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			return nil, nil, usagef("deployment init: %s %q is not a valid name: %s", flag, v, errs[0])
		}
	}
	if in.namespace != "" {
		if errs := validation.IsDNS1123Label(in.namespace); len(errs) > 0 {
			return nil, nil, usagef("deployment init: -n %q is not a valid namespace: %s", in.namespace, errs[0])
		}
	}
	for _, g := range in.grants {
		if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 {
			return nil, nil, usagef("deployment init: --grant %q is not a valid RoleBinding name: %s", g, errs[0])
		}
	}
	if err := checkDeploymentURL(in.url); err != nil {
		return nil, nil, err
	}
	var expose func(apiv1.Effect) bool
	switch in.expose {
	case exposeNonDestructive:
		expose = func(e apiv1.Effect) bool { return e != apiv1.EffectDestructive }
	case exposeAll:
		expose = func(apiv1.Effect) bool { return true }
	case exposeNone:
		expose = func(apiv1.Effect) bool { return false }
	default:
		return nil, nil, usagef("deployment init: --expose %q: want %s, %s or %s", in.expose, exposeNonDestructive, exposeAll, exposeNone)
	}
	var cred *apiv1.CredentialRef
	if in.secret != "" {
		if errs := validation.IsDNS1123Subdomain(in.secret); len(errs) > 0 {
			return nil, nil, usagef("deployment init: --credential-secret %q is not a valid Secret name: %s", in.secret, errs[0])
		}
		if in.secretKey == "" {
			return nil, nil, usagef("deployment init: --credential-key is empty")
		}
		cred = &apiv1.CredentialRef{Name: in.secret, Key: in.secretKey}
	}
	sd := &apiv1.ServiceDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiv1.GroupVersion.String(), Kind: "ServiceDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.namespace},
		Spec: apiv1.ServiceDeploymentSpec{
			ProfileRef:    apiv1.LocalObjectReference{Name: profileName},
			ProviderID:    providerID,
			MCPConnection: apiv1.MCPConnection{URL: in.url, CredentialRef: cred},
		},
	}
	var hidden []string
	for _, op := range doc.Operations {
		b := apiv1.OperationBinding{OperationRef: op.OperationRef, EndpointRef: apiv1.EndpointRefMCPConnection,
			GrantRefs: append([]string(nil), in.grants...), Expose: expose(op.Effect)}
		if cred != nil {
			c := *cred
			b.CredentialRef = &c
		}
		if !b.Expose {
			hidden = append(hidden, op.OperationRef)
		}
		sd.Spec.Operations = append(sd.Spec.Operations, b)
	}
	return sd, hidden, nil
}

// checkDeploymentURL holds --url to what the ServiceDeployment's schema and the operator accept:
// https (plain http only to a loopback address, for development managers), a host, no userinfo,
// no fragment.
func checkDeploymentURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || strings.ContainsAny(raw, " \t\r\n"):
		return usagef("deployment init: --url must be an absolute https URL")
	case !strings.EqualFold(u.Scheme, "https") && (!strings.EqualFold(u.Scheme, "http") || !isLoopbackURL(raw)):
		return usagef("deployment init: --url must be https (plain http only to loopback)")
	case u.User != nil:
		return usagef("deployment init: --url must not carry userinfo (user:pass@): name a bearer with --credential-secret")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return usagef("deployment init: --url must not carry a fragment (#...)")
	}
	return nil
}
