// Package activation is the activation domain the reconcilers and the gateway share: the stage
// table of both pipelines (table.go), the rulesets that turn a library's error into a stage
// outcome (rules.go), the StageError every stage ends in, the requests of the two ports to the
// outside world (SourceVerifier, Freezer) and the Resolver, which runs an McpServiceProfile's
// stages (source verification, snapshot reconstruction) and memoizes verified profiles.
//
// It holds no reconciler and links neither the registry client nor sigstore: the ports are
// implemented in internal/adapters, and the gateway resolves profiles through the
// same Resolver the manager uses. docs/concepts.md shows the activation table
// (TestConceptsTableMatchesCode). The table is the source of truth by construction: a
// StageError is built only from an Outcome the table declares (ProfileNotFound, GrantDenied, …)
// or by one of its classifiers, and TestDeclaredOutcomesAreInTheirRows holds every declared
// Outcome and classifier to the row of its own condition.
package activation
