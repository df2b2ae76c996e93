package drift

import (
	"encoding/json"
	"sort"
	"strings"
)

// Change classes. A class only informs review: any drift refuses activation whatever its class.
const (
	// ClassTextOnly marks a change of display text: a tool's title or description, a schema's
	// title, description, $comment or examples, or annotations.title.
	ClassTextOnly = "text_only"
	// ClassSchemaWidened marks a schema change that lets more instances validate: a new optional
	// property, an enum or type set grown, a constraint relaxed or removed (minimum, maximum,
	// minLength, maxLength, pattern, ...), a name removed from required, a false
	// additionalProperties turned true.
	ClassSchemaWidened = "schema_widened"
	// ClassSchemaNarrowed marks the inverse of ClassSchemaWidened: a property removed, an enum or
	// type set shrunk, a constraint added or tightened, a name added to required.
	ClassSchemaNarrowed = "schema_narrowed"
	// ClassAnnotationChanged marks a change under a tool's "annotations" other than its title
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint, unknown hints).
	ClassAnnotationChanged = "annotation_changed"
	// ClassNewTool marks a tool the reviewed snapshot does not have.
	ClassNewTool = "new_tool"
	// ClassRemovedTool marks a reviewed tool the candidate no longer lists.
	ClassRemovedTool = "removed_tool"
	// ClassProtocolChange marks a changed negotiated protocol revision.
	ClassProtocolChange = "protocol_change"
	// ClassOtherField marks a change of a descriptor member outside title, description,
	// annotations, inputSchema and outputSchema (e.g. _meta, icons, execution, unknown members).
	ClassOtherField = "other_field"
)

// Flags raised on changed or new tools. They are evidence for reviewers, not classes.
const (
	// FlagURLAdded marks a string of a changed or new descriptor that holds a URL the reviewed
	// descriptor did not hold.
	FlagURLAdded = "url_added"
)

// Classes lists every class in the fixed order used for counts and output.
var Classes = []string{
	ClassProtocolChange, ClassNewTool, ClassRemovedTool, ClassSchemaNarrowed, ClassSchemaWidened,
	ClassAnnotationChanged, ClassOtherField, ClassTextOnly,
}

// classRank orders classes as Classes does.
func classRank(c string) int {
	for i, k := range Classes {
		if k == c {
			return i
		}
	}
	return len(Classes)
}

// sortClasses sorts and de-duplicates classes in Classes order.
func sortClasses(cs []string) []string {
	sort.Slice(cs, func(i, j int) bool { return classRank(cs[i]) < classRank(cs[j]) })
	out := cs[:0]
	for i, c := range cs {
		if i == 0 || c != cs[i-1] {
			out = append(out, c)
		}
	}
	return out
}

var (
	widened  = []string{ClassSchemaWidened}
	narrowed = []string{ClassSchemaNarrowed}
	both     = []string{ClassSchemaNarrowed, ClassSchemaWidened}
	textOnly = []string{ClassTextOnly}
)

// classifyPath classifies one leaf change at the descriptor path toks (JSON pointer tokens). old or
// new is nil when the member was absent on that side.
func classifyPath(toks []string, old, new any) []string {
	return append([]string(nil), classifyShared(toks, old, new)...)
}

func classifyShared(toks []string, old, new any) []string {
	if len(toks) == 0 {
		return []string{ClassOtherField}
	}
	switch toks[0] {
	case "title", "description":
		if len(toks) == 1 {
			return textOnly
		}
		return []string{ClassOtherField}
	case "annotations":
		if len(toks) == 2 && toks[1] == "title" {
			return textOnly
		}
		return []string{ClassAnnotationChanged}
	case "inputSchema", "outputSchema":
		return classifySchema(toks[1:], old, new)
	}
	return []string{ClassOtherField}
}

// Schema keywords whose value is a subschema, a map of name to subschema, or an array of
// subschemas.
var (
	schemaValued = map[string]bool{
		"items": true, "additionalProperties": true, "not": true, "if": true, "then": true, "else": true,
		"contains": true, "propertyNames": true, "unevaluatedItems": true, "unevaluatedProperties": true,
		"additionalItems": true,
	}
	schemaMaps   = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}
	schemaArrays = map[string]bool{"anyOf": true, "allOf": true, "oneOf": true, "prefixItems": true}
	lowerBounds  = map[string]bool{"minimum": true, "exclusiveMinimum": true, "minLength": true, "minItems": true, "minProperties": true, "minContains": true}
	upperBounds  = map[string]bool{"maximum": true, "exclusiveMaximum": true, "maxLength": true, "maxItems": true, "maxProperties": true, "maxContains": true}
	// assertions whose mere presence constrains, but whose changed value is undecidable here.
	opaqueAssertions = map[string]bool{"pattern": true, "multipleOf": true, "format": true, "contentEncoding": true, "contentMediaType": true, "const": true, "dependentRequired": true}
	textKeywords     = map[string]bool{"title": true, "description": true, "$comment": true, "examples": true}
)

// classifySchema classifies a leaf change inside a JSON Schema. toks is the path relative to the
// schema root. Widened means the set of valid instances can only grow, narrowed that it can only
// shrink; a change that is neither provably (e.g. anyOf, $ref, a changed pattern) is both.
func classifySchema(toks []string, old, new any) []string {
	// Walk to the keyword that changed, tracking whether the last step was a property name.
	i := 0
	for i < len(toks) {
		kw := toks[i]
		rest := len(toks) - i - 1
		switch {
		case schemaMaps[kw] && rest >= 1:
			if rest == 1 {
				// A whole named subschema appeared or disappeared.
				if kw == "properties" {
					return propertyChange(old, new)
				}
				return addRemove(old, new)
			}
			i += 2
		case schemaArrays[kw] && rest >= 1:
			return both
		case schemaValued[kw] && rest >= 1:
			i++
		default:
			if rest > 0 {
				// Inside a keyword value that is not a subschema (e.g. an enum of objects).
				return both
			}
			return keywordChange(kw, old, new)
		}
	}
	// The change is a whole schema value (e.g. the root inputSchema, or items).
	return addRemove(old, new)
}

// propertyChange classifies a property definition added (widened, as an optional input; a
// required one also changes "required", which is classified on its own) or removed (narrowed).
func propertyChange(old, new any) []string {
	switch {
	case old == nil:
		return widened
	case new == nil:
		return narrowed
	}
	return both
}

// addRemove classifies a constraint appearing (narrowed) or disappearing (widened); a value
// replaced by another is undecidable (both).
func addRemove(old, new any) []string {
	switch {
	case old == nil:
		return narrowed
	case new == nil:
		return widened
	}
	return both
}

func keywordChange(kw string, old, new any) []string {
	switch {
	case textKeywords[kw]:
		return textOnly
	case kw == "required":
		return setChange(old, new, true)
	case kw == "enum":
		return setChange(old, new, false)
	case kw == "type":
		return setChange(toSet(old), toSet(new), false)
	case lowerBounds[kw] || upperBounds[kw]:
		if old == nil || new == nil {
			return addRemove(old, new)
		}
		o, ok1 := number(old)
		n, ok2 := number(new)
		if !ok1 || !ok2 {
			return both
		}
		if (n < o) == lowerBounds[kw] {
			return widened
		}
		return narrowed
	case kw == "uniqueItems":
		return boolConstraint(old, new, true)
	case kw == "additionalProperties" || kw == "unevaluatedProperties" || kw == "items" ||
		kw == "additionalItems" || kw == "unevaluatedItems":
		return boolConstraint(old, new, false)
	case opaqueAssertions[kw]:
		return addRemove(old, new)
	}
	// default, $ref, $schema, deprecated, readOnly, unknown keywords: undecidable.
	return both
}

// boolConstraint classifies a boolean keyword; constrainingValue is the value that constrains
// (true for uniqueItems, false for additionalProperties and items). Absence means the
// non-constraining value. A schema-valued replacement is undecidable.
func boolConstraint(old, new any, constrainingValue bool) []string {
	ob, ok1 := boolOr(old, !constrainingValue)
	nb, ok2 := boolOr(new, !constrainingValue)
	if !ok1 || !ok2 {
		if old == nil || new == nil {
			return addRemove(old, new)
		}
		return both
	}
	switch {
	case ob == nb:
		return both
	case nb == constrainingValue:
		return narrowed
	}
	return widened
}

func boolOr(v any, def bool) (bool, bool) {
	if v == nil {
		return def, true
	}
	b, ok := v.(bool)
	return b, ok
}

// setChange compares two JSON arrays as sets. For "required" (growNarrows) a grown set narrows;
// for enum and type a grown set widens. A missing array is the empty set for required and the
// universal set for enum and type.
func setChange(old, new any, growNarrows bool) []string {
	if !growNarrows && (old == nil || new == nil) {
		return addRemove(old, new)
	}
	os, ok1 := canonicalSet(old)
	ns, ok2 := canonicalSet(new)
	if !ok1 || !ok2 {
		return both
	}
	var added, removed bool
	for k := range ns {
		if !os[k] {
			added = true
		}
	}
	for k := range os {
		if !ns[k] {
			removed = true
		}
	}
	switch {
	case added && removed, !added && !removed:
		return both
	case added == growNarrows:
		return narrowed
	}
	return widened
}

func toSet(v any) any {
	if s, ok := v.(string); ok {
		return []any{s}
	}
	return v
}

func canonicalSet(v any) (map[string]bool, bool) {
	if v == nil {
		return map[string]bool{}, true
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	set := make(map[string]bool, len(arr))
	for _, e := range arr {
		c, err := canonical(e)
		if err != nil {
			return nil, false
		}
		set[string(c)] = true
	}
	return set, true
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// urlsIn returns the URL-like substrings of every string inside v.
func urlsIn(v any, into map[string]bool) {
	switch x := v.(type) {
	case string:
		for _, m := range urlPattern.FindAllString(x, -1) {
			into[strings.ToLower(m)] = true
		}
	case []any:
		for _, e := range x {
			urlsIn(e, into)
		}
	case map[string]any:
		for k, e := range x {
			urlsIn(k, into)
			urlsIn(e, into)
		}
	}
}
