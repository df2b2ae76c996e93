// Package adapters implements the controllers' outside-world interfaces over the project's
// packages: Freezer over mcpclient and egress (every byte to the MCP server goes through the
// egress port, with the bearer fetched from the deployment's own namespace per exchange), and
// PackVerifier over ocipack (pull by digest, sigstore and provenance verification). They are
// plain transport: they return the wrapped packages' own errors (or a StepError naming a step of
// their own), and package controllers' activation table classifies them into conditions;
// policy decisions stay in package controllers and in the packages they wrap.
package adapters
