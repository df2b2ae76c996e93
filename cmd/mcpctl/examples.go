package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples is the Examples section of every verb's help, by command path below the root. They are
// kept in one place, beside each other, so that they read as one vocabulary; newRootCmd attaches
// them and TestEveryVerbHasExamples holds every runnable verb to having one. "mcpctl" becomes
// "kubectl mcp" when the binary runs as the kubectl plugin.
var examples = map[string]string{
	"discover": `  # Negotiate with a remote server and print what it says it is
  mcpctl discover --url https://mcp.example.com/mcp

  # A local stdio server
  mcpctl discover -- ./legacy-server --stdio`,
	"snapshot": `  # Freeze a server's tool list into a ToolSnapshot
  mcpctl snapshot --url https://mcp.example.com/mcp > snapshot.json

  # Through the cluster's egress policy, allowing one private range
  mcpctl snapshot --egress hosted --allow-cidr 10.0.0.0/8 --url https://10.0.3.7/mcp`,
	"call": `  # Call one tool and print its complete result
  mcpctl call --url https://mcp.example.com/mcp --tool add --args '{"a":1,"b":2}'

  # Through the gateway, with a projected ServiceAccount token
  mcpctl call --url https://gateway.example.com/mcp/team-a/github --bearer-file /var/run/secrets/tokens/mcp --tool search`,
	"profile init": `  # Draft a profile document from a snapshot, then review its effects
  mcpctl profile init --snapshot snapshot.json --service-ref github > github.yaml`,
	"profile check": `  # Compare a reviewed profile with the live server (exit 4 on drift)
  mcpctl profile check --profile github.yaml --url https://mcp.example.com/mcp`,
	"approve": `  # Approve one pending call (you need the verb approve on it; never your own call)
  mcpctl approve team-a/apr-3f5kq2x7mbd4ye6w
  mcpctl approve apr-3f5kq2x7mbd4ye6w -n team-a --reason "change 4711"`,
	"deny": `  # Deny one pending call; the reason is shown to approvers, never to the caller
  mcpctl deny team-a/apr-3f5kq2x7mbd4ye6w --reason "not during the freeze"`,
	"approval list": `  # Requests of the current namespace waiting for a decision
  mcpctl approval list --pending

  # Every namespace, with deployment, approver and expiry
  mcpctl approval list -A -o wide`,
	"approval show": `  # The exact call: operation, caller, digests and the argument preview
  mcpctl approval show team-a/apr-3f5kq2x7mbd4ye6w
  mcpctl approval show apr-3f5kq2x7mbd4ye6w -n team-a -o yaml`,
	"review list": `  # Deployments of the current namespace waiting on review
  mcpctl review list

  # Every namespace, as YAML
  mcpctl review list -A -o yaml`,
	"review show": `  # Show a recorded drift field by field
  mcpctl review show team-a/github
  mcpctl review show github -n team-a -o json`,
	"review repin": `  # Write a new profile document for the recorded candidate
  mcpctl review repin team-a/github --profile github.yaml --out-file github-next.yaml`,
	"review refresh": `  # Ask the operator to re-verify a deployment's live server now
  mcpctl review refresh github -n team-a`,
	"pack push": `  # Pack reviewed profile documents and push them; prints REPO@sha256:DIGEST
  mcpctl pack push github.yaml --to registry.example.com/team/github`,
	"pack pull": `  # Pull a pack by digest and write its profile documents into a directory
  mcpctl pack pull registry.example.com/team/github@sha256:… --output-dir ./github`,
	"pack sign": `  # Sign a pack by digest with a cosign key, with a SLSA provenance attestation
  COSIGN_PASSWORD=… mcpctl pack sign registry.example.com/team/github@sha256:… --key cosign.key \
    --provenance-source-repo https://github.com/team/profiles --provenance-ref refs/heads/main`,
	"pack verify": `  # Verify a pack against a key and a provenance rule
  mcpctl pack verify registry.example.com/team/github@sha256:… --key cosign.pub \
    --provenance-source-repo https://github.com/team/profiles --provenance-ref refs/heads/main`,
	"serve": `  # Serve only the reviewed tools of a local stdio server to a desktop agent
  mcpctl serve --profile github.yaml -- npx -y @modelcontextprotocol/server-github

  # A signed pack, verified by digest, in front of a remote server
  mcpctl serve --pack registry.example.com/team/github@sha256:… --key cosign.pub --url https://mcp.example.com/mcp`,
	"login": `  # Sign in to a server's authorization server (browser), keep the token in XDG custody
  mcpctl login --url https://mcp.example.com/mcp

  # Hand the refresh token to the cluster as an owned, bound Secret
  mcpctl login --url https://mcp.example.com/mcp --to-secret team-a/github-oauth`,
	"logout": `  # Forget the stored credentials of a server
  mcpctl logout --url https://mcp.example.com/mcp`,
	"auth status": `  # List stored credentials (never token values)
  mcpctl auth status

  # Describe an in-cluster McpCredential and its target Secret
  mcpctl auth status --secret team-a/github-oauth -o yaml`,
	"deployment init": `  # A complete ServiceDeployment for a reviewed profile; destructive operations stay hidden
  mcpctl deployment init --profile github.yaml --grant github-invokers --url https://mcp.example.com/mcp \
    --credential-secret github-token -n team-a > github-deployment.yaml`,
	"trusted-root fetch": `  # Public-good Sigstore's trusted root, verified over TUF, into the manager's ConfigMap
  mcpctl trusted-root fetch > trusted_root.json
  kubectl create configmap sigstore-trusted-root -n connector-mcp-system --from-file=trusted_root.json`,
	"version": `  mcpctl version
  mcpctl --version`,
}

// verbPath is the path of c below the root, e.g. "pack push" (whatever name the root displays).
func verbPath(c *cobra.Command) string {
	var names []string
	for ; c.HasParent(); c = c.Parent() {
		names = append([]string{c.Name()}, names...)
	}
	return strings.Join(names, " ")
}

// attachExamples sets the Example of every command of root that has one, in display's words.
func attachExamples(root *cobra.Command, display string) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[verbPath(c)]; ok {
			c.Example = strings.ReplaceAll(ex, "mcpctl ", display+" ")
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
