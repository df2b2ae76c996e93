package invocation

import "github.com/b10x/connector-mcp/argschema"

// KeywordAmbiguousKeys is the InvalidArgumentsError.Keyword of arguments holding an object with
// two member names that are equal under Unicode simple case folding (argschema.KeywordAmbiguousKeys).
// The refusal is invalid_arguments; nothing is sent.
const KeywordAmbiguousKeys = argschema.KeywordAmbiguousKeys
