package controllers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// CheckProfile decides whether a profile document is a complete, reviewed profile whose recorded
// digests reconstruct, using the ocipack checks (the same ones a pack layer is held to). It
// returns the recorded snapshot on success. Refusals carry the SourceVerified condition (fields,
// mapping, effects; reason ProfileInvalid) or SnapshotReconstructed (digests; reason
// SnapshotDigestMismatch).
func CheckProfile(doc *v1.ProfileDocument) (*snapshot.ToolSnapshot, *StageError) {
	if doc == nil {
		return nil, refuse(v1.ConditionSourceVerified, v1.ReasonProfileInvalid, "the profile has no document")
	}
	for _, check := range []ocipack.Check{ocipack.ValidateFields, ocipack.ValidateMapping, ocipack.ValidateEffects} {
		if err := check(doc); err != nil {
			return nil, &StageError{Condition: v1.ConditionSourceVerified, Reason: v1.ReasonProfileInvalid, Err: err,
				Message: "the profile document is refused: " + RefusalText(err, "invalid")}
		}
	}
	rec, err := ocipack.SnapshotOf(doc)
	if err != nil {
		return nil, &StageError{Condition: v1.ConditionSnapshotReconstructed, Reason: v1.ReasonSnapshotDigestMismatch, Err: err,
			Message: "the recorded snapshot does not reconstruct: " + RefusalText(err, "invalid")}
	}
	return rec, nil
}

// RefusalText renders err for a condition message: the stable refusal name (with the document
// path for ocipack refusals, as "name at path"), clipped, never document or server text;
// fallback when err carries no refusal name.
func RefusalText(err error, fallback string) string {
	var r *ocipack.RefusalError
	if errors.As(err, &r) {
		if r.Path != "" {
			return clipN(r.Name, 64) + " at " + clipN(r.Path, 128)
		}
		return clipN(r.Name, 64)
	}
	if name := refusal.Name(err); name != "" {
		return clipN(name, 64)
	}
	return fallback
}

// MatchDecision is the outcome of comparing a live snapshot against the reviewed one.
type MatchDecision struct {
	// Matched is true when the live snapshot equals the reviewed one: same protocol revision,
	// same tool names, same descriptor digests and the same snapshot digest.
	Matched bool
	// Diff is the difference by names and digests (empty when Matched).
	Diff snapshot.Diff
}

// DecideMatch compares the live snapshot against the reviewed one. Equality is typed: protocol
// revision, every descriptor digest (RFC 8785, so byte-for-byte on the canonical form) and the
// snapshot digest must all agree.
func DecideMatch(recorded, live *snapshot.ToolSnapshot) MatchDecision {
	d := snapshot.Compare(recorded, live)
	ok := d.Empty() && recorded != nil && live != nil && recorded.Digest == live.Digest && len(recorded.Tools) == len(live.Tools)
	return MatchDecision{Matched: ok, Diff: d}
}

// DriftStatus renders a diff for status: names and digests only, protocol only when it changed,
// each list bounded to the API's maximum.
func DriftStatus(d snapshot.Diff) *v1.SnapshotDrift {
	const maxItems = 512
	out := &v1.SnapshotDrift{}
	if d.ProtocolFrom != d.ProtocolTo {
		out.ProtocolFrom, out.ProtocolTo = clipN(d.ProtocolFrom, 10), clipN(d.ProtocolTo, 10)
	}
	for i, t := range d.Added {
		if i == maxItems {
			break
		}
		out.Added = append(out.Added, v1.ToolRef{Name: clipN(t.Name, 128), Digest: t.Digest})
	}
	for i, t := range d.Removed {
		if i == maxItems {
			break
		}
		out.Removed = append(out.Removed, v1.ToolRef{Name: clipN(t.Name, 128), Digest: t.Digest})
	}
	for i, t := range d.Changed {
		if i == maxItems {
			break
		}
		out.Changed = append(out.Changed, v1.ChangedTool{Name: clipN(t.Name, 128), From: t.From, To: t.To})
	}
	return out
}

// DriftSummary is a one-line, prose-free summary of a diff for a condition message.
func DriftSummary(d snapshot.Diff) string {
	var parts []string
	if d.ProtocolFrom != d.ProtocolTo {
		parts = append(parts, fmt.Sprintf("protocol %s -> %s", clipN(d.ProtocolFrom, 10), clipN(d.ProtocolTo, 10)))
	}
	names := func(kind string, n int, name func(int) string) {
		if n == 0 {
			return
		}
		var ns []string
		for i := 0; i < n && i < 5; i++ {
			ns = append(ns, fmt.Sprintf("%q", clip(name(i))))
		}
		if n > 5 {
			ns = append(ns, fmt.Sprintf("and %d more", n-5))
		}
		parts = append(parts, kind+" "+strings.Join(ns, ", "))
	}
	names("added", len(d.Added), func(i int) string { return d.Added[i].Name })
	names("removed", len(d.Removed), func(i int) string { return d.Removed[i].Name })
	names("changed", len(d.Changed), func(i int) string { return d.Changed[i].Name })
	if len(parts) == 0 {
		parts = append(parts, "snapshot digest differs")
	}
	return "the live tool list differs from the reviewed snapshot: " + strings.Join(parts, "; ")
}

// CheckBindings runs the binding checks that need no cluster access: the deployment's operation
// set equals the profile's exactly, every operation carries endpointRef "mcp_connection", the
// exact credential reference of the connection, and at least one grant.
func CheckBindings(doc *v1.ProfileDocument, spec *v1.ServiceDeploymentSpec) *StageError {
	want := make(map[string]bool, len(doc.Operations))
	for _, o := range doc.Operations {
		want[o.OperationRef] = true
	}
	have := make(map[string]bool, len(spec.Operations))
	var extra []string
	for _, b := range spec.Operations {
		have[b.OperationRef] = true
		if !want[b.OperationRef] {
			extra = append(extra, b.OperationRef)
		}
	}
	var missing []string
	for _, o := range sortedKeys(want) {
		if !have[o] {
			missing = append(missing, o)
		}
	}
	if len(extra) > 0 || len(missing) > 0 {
		sort.Strings(extra)
		msg := "the operations must equal the profile's operation set exactly:"
		if len(missing) > 0 {
			msg += " missing " + quoteList(missing)
		}
		if len(extra) > 0 {
			if len(missing) > 0 {
				msg += ";"
			}
			msg += " unknown " + quoteList(extra)
		}
		return refuse(v1.ConditionBound, v1.ReasonOperationSetMismatch, "%s", msg)
	}
	for _, b := range spec.Operations {
		if b.EndpointRef != v1.EndpointRefMCPConnection {
			return refuse(v1.ConditionBound, v1.ReasonEndpointRefInvalid, "operation %q has endpointRef %q; it must be %q", clip(b.OperationRef), clip(b.EndpointRef), v1.EndpointRefMCPConnection)
		}
		if !sameCredential(b.CredentialRef, spec.MCPConnection.CredentialRef) {
			return refuse(v1.ConditionBound, v1.ReasonCredentialRefMismatch, "operation %q must carry exactly the connection's credentialRef (%s)", clip(b.OperationRef), describeCredential(spec.MCPConnection.CredentialRef))
		}
		if len(b.GrantRefs) == 0 {
			return refuse(v1.ConditionBound, v1.ReasonGrantNotFound, "operation %q names no grant", clip(b.OperationRef))
		}
	}
	return nil
}

func sameCredential(a, b *v1.CredentialRef) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func describeCredential(c *v1.CredentialRef) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("secret %q key %q", c.Name, c.Key)
}

// InvokeVerb is the RBAC verb a grant must allow on servicedeployments.
const InvokeVerb = v1.InvokeVerb

// ServiceDeploymentsResource is the RBAC resource a grant must name.
const ServiceDeploymentsResource = v1.ServiceDeploymentsResource

// RulesAllowInvoke reports whether RBAC policy rules allow the verb "invoke" on the
// servicedeployments resource of group connectors.b10x.io for the named deployment, with the
// same matching Kubernetes RBAC applies (so `kubectl auth can-i` agrees): "*" matches any verb,
// group or resource, and an empty resourceNames list means every name.
func RulesAllowInvoke(rules []rbacv1.PolicyRule, name string) bool {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 && len(r.Resources) == 0 {
			continue
		}
		if !matches(r.Verbs, InvokeVerb) || !matches(r.APIGroups, v1.GroupVersion.Group) || !matches(r.Resources, ServiceDeploymentsResource) {
			continue
		}
		if len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name) {
			return true
		}
	}
	return false
}

func matches(set []string, want string) bool {
	return slices.Contains(set, want) || slices.Contains(set, rbacv1.ResourceAll)
}

// Claim is what one deployment holds in the bundle: its permanent provider identity, its
// endpoint authority and the operations of its Connection.
type Claim struct {
	// Key is "namespace/name" of the deployment.
	Key string
	// Created orders claims: first come keeps the name.
	Created metav1.Time
	// Provider is the providerID.
	Provider string
	// Authority is the normalized endpoint (see NormalizeEndpoint); empty when invalid.
	Authority string
	// Operations are "connectionRef/operationRef" keys; empty when the profile is not resolved.
	Operations []string
}

// before reports whether claim a came first: earlier creation, then key order.
func (a Claim) before(b Claim) bool {
	if !a.Created.Equal(&b.Created) {
		return a.Created.Before(&b.Created)
	}
	return a.Key < b.Key
}

// FindCollision applies the bundle builder's collision rules to self against every other claim:
// a provider identity, an endpoint authority or an operation of a Connection belongs to the
// deployment that claimed it first; the later one is refused with a reason naming the holder
// when it is in the same namespace, and saying only "another deployment, in another namespace"
// otherwise.
func FindCollision(self Claim, all []Claim) *StageError {
	var holder *Claim
	var kind, value string
	consider := func(c *Claim, k, v string) {
		if holder == nil || c.before(*holder) {
			holder, kind, value = c, k, v
		}
	}
	ops := make(map[string]bool, len(self.Operations))
	for _, o := range self.Operations {
		ops[o] = true
	}
	for i := range all {
		c := &all[i]
		if c.Key == self.Key || !c.before(self) {
			continue
		}
		switch {
		case c.Provider == self.Provider:
			consider(c, v1.ReasonProviderCollision, "providerID "+strconvQuote(self.Provider))
		case self.Authority != "" && c.Authority == self.Authority:
			consider(c, v1.ReasonAuthorityCollision, "endpoint "+strconvQuote(self.Authority))
		default:
			for _, o := range c.Operations {
				if ops[o] {
					consider(c, v1.ReasonOperationCollision, "operation "+strconvQuote(o))
					break
				}
			}
		}
	}
	if holder == nil {
		return nil
	}
	if namespaceOf(holder.Key) != namespaceOf(self.Key) {
		// Nothing of another namespace is named: not its namespace, not its deployment.
		return refuse(v1.ConditionBound, kind, "%s is held by another deployment, in another namespace", value)
	}
	return refuse(v1.ConditionBound, kind, "%s is held by ServiceDeployment %s", value, holder.Key)
}

// namespaceOf returns the namespace part of a "namespace/name" claim key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// NormalizeEndpoint returns the endpoint identity of an MCP URL: lowercase scheme and host
// without a trailing dot, explicit decimal port, and the path with percent-escapes normalised
// (escaped unreserved characters decoded, other escapes in upper case), without userinfo, query
// or fragment. Two URLs naming the same endpoint normalize equally, so "https://h./%6Dcp" and
// "https://H:443/mcp" collide.
func NormalizeEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("the endpoint URL does not parse")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", errors.New("the endpoint URL must be http or https")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" || strings.HasSuffix(host, ".") {
		return "", errors.New("the endpoint URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", errors.New("the endpoint URL has an invalid port")
	}
	path, err := normalizePath(u.EscapedPath())
	if err != nil {
		return "", errors.New("the endpoint URL has an invalid path escape")
	}
	if path == "" {
		path = "/"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.FormatUint(n, 10)) + path, nil
}

// normalizePath rewrites an escaped path per RFC 3986 section 6.2.2: escapes of unreserved
// characters are decoded, every other escape is written in upper case.
func normalizePath(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(p) {
			return "", errors.New("truncated escape")
		}
		v, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		if d := byte(v); isUnreserved(d) {
			b.WriteByte(d)
		} else {
			fmt.Fprintf(&b, "%%%02X", d)
		}
		i += 2
	}
	return b.String(), nil
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// SanitizeURL renders a URL for conditions, events and logs: scheme, host, port and path only.
func SanitizeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return clipN((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), 256)
}

// NextVerification is when a deployment frozen at last is re-verified: last + interval plus a
// deterministic per-object jitter of up to jitter×interval, derived from seed (the object's
// UID), so that reconciling an unchanged object always computes the same time and many
// deployments do not re-freeze in lockstep.
func NextVerification(last time.Time, interval time.Duration, jitter float64, seed string) time.Time {
	if jitter <= 0 {
		return last.Add(interval)
	}
	h := sha256.Sum256([]byte(seed))
	frac := float64(binary.BigEndian.Uint64(h[:8])) / float64(^uint64(0))
	return last.Add(interval + time.Duration(jitter*frac*float64(interval)))
}

// CredentialHashKeyMinBytes is the minimum length of the operator-held credential hash key.
const CredentialHashKeyMinBytes = 32

// CredentialHash is the status fingerprint of a credential value: HMAC-SHA256 under the
// operator-held key over the deployment's UID and the value, so a rotation is noticed, the value
// is never stored, and a reader of status who guesses candidate values cannot confirm a guess
// without the key. Rendered "hmac:<hex>" (HMAC-SHA256, 64 hex digits).
func CredentialHash(key []byte, uid string, value []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("connector-mcp credential v2\x00"))
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write(value)
	return "hmac:" + hex.EncodeToString(h.Sum(nil))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quoteList(xs []string) string {
	const max = 8
	q := make([]string, 0, len(xs))
	for i, x := range xs {
		if i == max {
			q = append(q, fmt.Sprintf("and %d more", len(xs)-max))
			break
		}
		q = append(q, fmt.Sprintf("%q", clip(x)))
	}
	return strings.Join(q, ", ")
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", clipN(s, 256)) }

// clip bounds an identifier before it goes into a message.
func clip(s string) string { return clipN(s, 64) }

func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
