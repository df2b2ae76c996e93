package ocipack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// MaxProfileSize bounds a profile document accepted by DecodeProfile (4 MiB).
const MaxProfileSize = 4 << 20

// Format is the serialization of a profile document.
type Format int

const (
	// FormatJSON is the RFC 8785 canonical JSON form: the content of a pack layer. Encoding the same
	// document twice yields the same bytes, so the same reviewed profile packs to the same digest.
	FormatJSON Format = iota
	// FormatYAML is the human-review form printed by "mcpctl profile init".
	FormatYAML
)

// DecodeProfile decodes a profile document from JSON or YAML (detected by the first non-blank
// byte: '{' means JSON) strictly into apiv1.ProfileDocument: unknown fields, duplicate keys at any
// depth (descriptors included), trailing data or a second YAML document, invalid UTF-8 and a wrong
// contract identity are refused with a *RefusalError whose Path is the JSON path of the offending
// field. DecodeProfile checks the shape only; Validate checks the mapping, digests and effects.
func DecodeProfile(data []byte) (*apiv1.ProfileDocument, error) {
	if len(data) > MaxProfileSize {
		return nil, refuse(RefusalProfileTooLarge, "", ErrInvalidProfile)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	var js []byte
	if len(trimmed) > 0 && trimmed[0] == '{' {
		js = data
	} else {
		var err error
		if js, err = yamlToJSON(data); err != nil {
			return nil, err
		}
	}
	// Duplicate keys at any depth, invalid UTF-8, trailing data: the same rules the snapshot
	// digests rely on.
	if _, err := snapshot.Canonicalize(js); err != nil {
		var r *snapshot.RefusalError
		if errors.As(err, &r) {
			name := r.Name
			if name == snapshot.RefusalInvalidJSON {
				name = RefusalInvalidProfile
			}
			return nil, refuse(name, pointerToPath(r.Path), fmt.Errorf("%w: %w", ErrInvalidProfile, err))
		}
		return nil, refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	var doc apiv1.ProfileDocument
	strict, err := k8sjson.UnmarshalStrict(js, &doc)
	if err != nil {
		var path string
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			path = te.Field
		}
		return nil, refuse(RefusalInvalidProfile, path, ErrInvalidProfile)
	}
	if len(strict) > 0 {
		se := strict[0]
		var fe k8sjson.FieldError
		path := ""
		if errors.As(se, &fe) {
			path = fe.FieldPath()
		}
		name := RefusalUnknownField
		if strings.HasPrefix(se.Error(), "duplicate field") {
			name = RefusalDuplicateKey
		}
		return nil, refuse(name, path, ErrInvalidProfile)
	}
	if doc.Contract != apiv1.ContractV1 {
		return nil, refuse(RefusalWrongContract, "contract", ErrWrongContract)
	}
	for i, t := range doc.Snapshot.Tools {
		if len(bytes.TrimSpace(t.Descriptor.Raw)) == 0 || bytes.TrimSpace(t.Descriptor.Raw)[0] != '{' {
			return nil, refuse(RefusalInvalidProfile, fmt.Sprintf("snapshot.tools[%d].descriptor", i), ErrInvalidProfile)
		}
	}
	return &doc, nil
}

// yamlToJSON converts exactly one YAML document to JSON, refusing duplicate keys and any further
// document in the stream.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var first, second yamlv3.Node
	if err := dec.Decode(&first); err != nil {
		return nil, refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return nil, refuse(RefusalTrailingData, "", ErrInvalidProfile)
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		name := RefusalInvalidProfile
		if strings.Contains(err.Error(), "already set in map") || strings.Contains(err.Error(), "duplicate") {
			name = RefusalDuplicateKey
		}
		return nil, refuse(name, "", ErrInvalidProfile)
	}
	return js, nil
}

// pointerToPath turns an RFC 6901 JSON Pointer ("/operations/2/effect") into the JSON path form
// used in this package's errors ("operations[2].effect").
func pointerToPath(ptr string) string {
	if ptr == "" || ptr == "/" {
		return ""
	}
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		if isIndex(seg) {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// EncodeProfile serializes doc. FormatJSON yields RFC 8785 canonical JSON (the pack layer form);
// FormatYAML yields YAML for review. DecodeProfile(EncodeProfile(doc)) equals doc.
func EncodeProfile(doc *apiv1.ProfileDocument, format Format) ([]byte, error) {
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, refuse(RefusalInvalidProfile, "", fmt.Errorf("%w: %w", ErrInvalidProfile, err))
	}
	canon, err := snapshot.Canonicalize(js)
	if err != nil {
		return nil, refuse(RefusalInvalidProfile, "", fmt.Errorf("%w: %w", ErrInvalidProfile, err))
	}
	switch format {
	case FormatJSON:
		return canon, nil
	case FormatYAML:
		return canonicalToYAML(canon)
	default:
		return nil, fmt.Errorf("ocipack: unknown profile format %d", format)
	}
}

// canonicalToYAML renders canonical JSON as YAML with yaml.v3, whose emitter escapes every
// character YAML cannot carry raw (a JSON-to-YAML reparse would refuse them). Numbers keep their
// value: integers that fit int64 stay integers, others become float64, exactly as RFC 8785 reads
// them.
func canonicalToYAML(canon []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(yamlValue(v)); err != nil {
		return nil, refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	if err := enc.Close(); err != nil {
		return nil, refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	return buf.Bytes(), nil
}

func yamlValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = yamlValue(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = yamlValue(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	default:
		return v
	}
}

// ProfileDigest returns "sha256:<hex>" over the RFC 8785 canonical JSON of doc: the profile digest
// recorded in status. The same document yields the same digest whatever its source encoding.
func ProfileDigest(doc *apiv1.ProfileDocument) (string, error) {
	canon, err := EncodeProfile(doc, FormatJSON)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// SnapshotOf returns the recorded snapshot of doc as a snapshot.ToolSnapshot after reconstructing
// every descriptor digest and the snapshot digest from the recorded descriptors. A mismatch is a
// *RefusalError "digest_mismatch" (Path names the tool) wrapping the snapshot package's error.
func SnapshotOf(doc *apiv1.ProfileDocument) (*snapshot.ToolSnapshot, error) {
	rs := doc.Snapshot
	s := &snapshot.ToolSnapshot{
		ProtocolVersion: rs.ProtocolVersion,
		ServerInfo:      snapshot.ServerInfo{Name: rs.ServerInfo.Name, Title: rs.ServerInfo.Title, Version: rs.ServerInfo.Version},
		Digest:          rs.Digest,
		Tools:           make([]snapshot.Tool, 0, len(rs.Tools)),
	}
	for _, t := range rs.Tools {
		s.Tools = append(s.Tools, snapshot.Tool{Name: t.Name, Digest: t.Digest, Descriptor: bytes.Clone(t.Descriptor.Raw)})
	}
	if err := s.Verify(); err != nil {
		name := snapshot.RefusalDigestMismatch
		path := "snapshot.digest"
		var m *snapshot.MismatchError
		var r *snapshot.RefusalError
		switch {
		case errors.As(err, &m):
			if m.Tool != "" {
				path = toolPath(doc, m.Tool)
			}
		case errors.As(err, &r):
			name = r.Name
			path = toolPath(doc, r.Tool)
		}
		return nil, refuse(name, path, fmt.Errorf("%w: %w", ErrSnapshotMismatch, err))
	}
	return s, nil
}

func toolPath(doc *apiv1.ProfileDocument, name string) string {
	for i, t := range doc.Snapshot.Tools {
		if t.Name == name {
			return fmt.Sprintf("snapshot.tools[%d]", i)
		}
	}
	return "snapshot.tools"
}

// Check is one pure validation of a profile document.
type Check func(doc *apiv1.ProfileDocument) error

// reviewedChecks are the checks a profile must pass before it may be activated, in order: schema
// facts, one-to-one mapping, reconstructed digests, reviewed effects.
var reviewedChecks = []Check{ValidateFields, ValidateMapping, validateDigests, ValidateEffects}

// draftChecks are reviewedChecks without the effect review: a draft from Draft passes them.
var draftChecks = []Check{ValidateFields, ValidateMapping, validateDigests, validateDraftEffects}

// Validate runs reviewedChecks and returns the first refusal.
func Validate(doc *apiv1.ProfileDocument) error { return runChecks(doc, reviewedChecks) }

// Reviewed is Validate that also returns the recorded snapshot its digest check reconstructed
// (SnapshotOf), so that a caller which needs the snapshot does not check the document twice. It
// runs the reviewedChecks in their order, with SnapshotOf in validateDigests' place, and returns
// the first refusal (the same one Validate returns; TestValidateRefusals holds both to it).
func Reviewed(doc *apiv1.ProfileDocument) (*snapshot.ToolSnapshot, error) {
	if err := runChecks(doc, []Check{ValidateFields, ValidateMapping}); err != nil {
		return nil, err
	}
	snap, err := SnapshotOf(doc)
	if err != nil {
		return nil, err
	}
	if err := ValidateEffects(doc); err != nil {
		return nil, err
	}
	return snap, nil
}

// ValidateDraft runs draftChecks and returns the first refusal.
func ValidateDraft(doc *apiv1.ProfileDocument) error { return runChecks(doc, draftChecks) }

func runChecks(doc *apiv1.ProfileDocument, checks []Check) error {
	if doc == nil {
		return refuse(RefusalInvalidProfile, "", ErrInvalidProfile)
	}
	for _, c := range checks {
		if err := c(doc); err != nil {
			return err
		}
	}
	return nil
}

var (
	refPattern      = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	protocolPattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	digestPattern   = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// ValidateFields checks the schema facts the CRD enforces, so that a pack layer is held to the
// same rules as an inline profile: contract, reference patterns, required values and bounds.
func ValidateFields(doc *apiv1.ProfileDocument) error {
	bad := func(path string) error { return refuse(RefusalInvalidField, path, ErrInvalidField) }
	if doc.Contract != apiv1.ContractV1 {
		return refuse(RefusalWrongContract, "contract", ErrWrongContract)
	}
	if len(doc.Service.Ref) > 128 || !refPattern.MatchString(doc.Service.Ref) {
		return bad("service.ref")
	}
	if len(doc.Service.ConnectionRef) > 128 || !refPattern.MatchString(doc.Service.ConnectionRef) {
		return bad("service.connectionRef")
	}
	if doc.Provider.URL != "" && (!strings.HasPrefix(doc.Provider.URL, "https://") || len(doc.Provider.URL) > 2048 || hasUserinfo(doc.Provider.URL)) {
		return bad("provider.url")
	}
	if len(doc.Provider.DisplayName) > 256 {
		return bad("provider.displayName")
	}
	if len(doc.Provider.Description) > 4096 {
		return bad("provider.description")
	}
	if !protocolPattern.MatchString(doc.Snapshot.ProtocolVersion) {
		return bad("snapshot.protocolVersion")
	}
	if !digestPattern.MatchString(doc.Snapshot.Digest) {
		return bad("snapshot.digest")
	}
	if n := len(doc.Snapshot.Tools); n < 1 || n > 512 {
		return bad("snapshot.tools")
	}
	for i, t := range doc.Snapshot.Tools {
		if t.Name == "" || len(t.Name) > 128 {
			return bad(fmt.Sprintf("snapshot.tools[%d].name", i))
		}
		if !digestPattern.MatchString(t.Digest) {
			return bad(fmt.Sprintf("snapshot.tools[%d].digest", i))
		}
	}
	if n := len(doc.Operations); n < 1 || n > 512 {
		return bad("operations")
	}
	for i, o := range doc.Operations {
		p := fmt.Sprintf("operations[%d]", i)
		switch {
		case o.RemoteName == "" || len(o.RemoteName) > 128:
			return bad(p + ".remoteName")
		case len(o.OperationRef) > 128 || !refPattern.MatchString(o.OperationRef):
			return bad(p + ".operationRef")
		case o.Title == "" || len(o.Title) > 256:
			return bad(p + ".title")
		case len(o.Description) > 4096:
			return bad(p + ".description")
		case len(o.SensitiveArguments) > 64:
			return bad(p + ".sensitiveArguments")
		}
		seen := make(map[string]bool, len(o.SensitiveArguments))
		for _, a := range o.SensitiveArguments {
			if a == "" || len(a) > 256 || seen[a] {
				return bad(p + ".sensitiveArguments")
			}
			seen[a] = true
		}
	}
	return nil
}

// ValidateMapping checks the one-to-one mapping: every snapshot tool is mapped by exactly one
// operation, every operation maps a tool of the snapshot, and operationRefs are unique.
func ValidateMapping(doc *apiv1.ProfileDocument) error {
	tools := make(map[string]bool, len(doc.Snapshot.Tools))
	for _, t := range doc.Snapshot.Tools {
		tools[t.Name] = false
	}
	refs := make(map[string]bool, len(doc.Operations))
	for i, o := range doc.Operations {
		p := fmt.Sprintf("operations[%d]", i)
		mapped, ok := tools[o.RemoteName]
		switch {
		case !ok:
			return refuse(RefusalUnknownTool, p+".remoteName", ErrUnknownTool)
		case mapped:
			return refuse(RefusalDuplicateMapping, p+".remoteName", ErrDuplicateMapping)
		case refs[o.OperationRef]:
			return refuse(RefusalDuplicateOperationRef, p+".operationRef", ErrDuplicateOperationRef)
		}
		tools[o.RemoteName] = true
		refs[o.OperationRef] = true
	}
	for i, t := range doc.Snapshot.Tools {
		if !tools[t.Name] {
			return refuse(RefusalUnmappedTool, fmt.Sprintf("snapshot.tools[%d]", i), ErrUnmappedTool)
		}
	}
	return nil
}

// validateDigests reconstructs every descriptor digest and the snapshot digest from the recorded
// descriptors and matches them with the recorded ones (see SnapshotOf).
func validateDigests(doc *apiv1.ProfileDocument) error {
	_, err := SnapshotOf(doc)
	return err
}

// ValidateEffects checks that every effect is a reviewed one: read, write or destructive. The draft
// placeholder "unreviewed" is refused as "unreviewed", anything else as "invalid_effect".
func ValidateEffects(doc *apiv1.ProfileDocument) error {
	for i, o := range doc.Operations {
		switch o.Effect {
		case apiv1.EffectRead, apiv1.EffectWrite, apiv1.EffectDestructive:
		case apiv1.EffectUnreviewed:
			return refuse(RefusalUnreviewed, fmt.Sprintf("operations[%d].effect", i), ErrUnreviewedEffect)
		default:
			return refuse(RefusalInvalidEffect, fmt.Sprintf("operations[%d].effect", i), ErrInvalidEffect)
		}
	}
	return nil
}

// validateDraftEffects is ValidateEffects that also admits the "unreviewed" placeholder.
func validateDraftEffects(doc *apiv1.ProfileDocument) error {
	for i, o := range doc.Operations {
		switch o.Effect {
		case apiv1.EffectRead, apiv1.EffectWrite, apiv1.EffectDestructive, apiv1.EffectUnreviewed:
		default:
			return refuse(RefusalInvalidEffect, fmt.Sprintf("operations[%d].effect", i), ErrInvalidEffect)
		}
	}
	return nil
}

// Draft returns a draft profile document for s: the complete recorded snapshot, every tool mapped
// to a placeholder operation (operationRef derived from the tool name, title = the tool name,
// effect "unreviewed"), and service references derived from the server name. A reviewer must set
// every effect (and should set titles, descriptions and references) before the profile validates.
// The server's own titles and descriptions are deliberately not copied: they are evidence, not
// authority.
func Draft(s *snapshot.ToolSnapshot) *apiv1.ProfileDocument {
	svc := refFrom(s.ServerInfo.Name)
	if svc == "" {
		svc = "service"
	}
	doc := &apiv1.ProfileDocument{
		Contract: apiv1.ContractV1,
		Service:  apiv1.ServiceIdentity{Ref: svc, ConnectionRef: svc},
		Snapshot: apiv1.RecordedSnapshot{
			ProtocolVersion: s.ProtocolVersion,
			ServerInfo:      apiv1.ServerInfo{Name: s.ServerInfo.Name, Title: s.ServerInfo.Title, Version: s.ServerInfo.Version},
			Digest:          s.Digest,
		},
	}
	used := map[string]bool{}
	for _, t := range s.Tools {
		doc.Snapshot.Tools = append(doc.Snapshot.Tools, apiv1.RecordedTool{
			Name: t.Name, Digest: t.Digest, Descriptor: runtime.RawExtension{Raw: bytes.Clone(t.Descriptor)},
		})
		ref := refFrom(t.Name)
		if ref == "" {
			ref = "op"
		}
		base := ref
		for n := 2; used[ref]; n++ {
			ref = fmt.Sprintf("%s-%d", base, n)
		}
		used[ref] = true
		title := t.Name
		if len(title) > 256 {
			title = title[:256]
		}
		doc.Operations = append(doc.Operations, apiv1.OperationMapping{
			RemoteName: t.Name, OperationRef: ref, Title: title, Effect: apiv1.EffectUnreviewed,
		})
	}
	return doc
}

// refFrom derives a reference matching ^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$ (at most 120 bytes) from
// a remote name.
func refFrom(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 120 {
			break
		}
	}
	return strings.Trim(b.String(), "._-")
}

// hasUserinfo reports whether the authority of raw ("scheme://authority...") carries userinfo
// (user:pass@): configuration names sources, never values. It is the CRDs' CEL rule.
func hasUserinfo(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}
