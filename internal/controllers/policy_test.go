package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/snapshot"
)

// testDoc builds a reviewed profile document over real snapshot digests.
func testDoc(t *testing.T, protocol string, descriptors ...string) *v1.ProfileDocument {
	t.Helper()
	raws := make([]json.RawMessage, len(descriptors))
	for i, d := range descriptors {
		raws[i] = json.RawMessage(d)
	}
	s, err := snapshot.New(protocol, snapshot.ServerInfo{Name: "test"}, raws)
	if err != nil {
		t.Fatal(err)
	}
	doc := &v1.ProfileDocument{
		Contract: v1.ContractV1,
		Service:  v1.ServiceIdentity{Ref: "svc", ConnectionRef: "conn"},
		Snapshot: v1.RecordedSnapshot{ProtocolVersion: protocol, Digest: s.Digest, ServerInfo: v1.ServerInfo{Name: "test"}},
	}
	for _, tool := range s.Tools {
		doc.Snapshot.Tools = append(doc.Snapshot.Tools, v1.RecordedTool{Name: tool.Name, Digest: tool.Digest, Descriptor: runtime.RawExtension{Raw: tool.Descriptor}})
		doc.Operations = append(doc.Operations, v1.OperationMapping{RemoteName: tool.Name, OperationRef: "op-" + tool.Name, Title: tool.Name, Effect: v1.EffectRead})
	}
	return doc
}

func liveSnapshot(t *testing.T, protocol string, descriptors ...string) *snapshot.ToolSnapshot {
	t.Helper()
	raws := make([]json.RawMessage, len(descriptors))
	for i, d := range descriptors {
		raws[i] = json.RawMessage(d)
	}
	s, err := snapshot.New(protocol, snapshot.ServerInfo{Name: "live"}, raws)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	toolA  = `{"name":"a","description":"reads a","inputSchema":{"type":"object"}}`
	toolA2 = `{"inputSchema":{"type":"object"},  "description":"reads a","name":"a"}` // same, reordered
	toolAx = `{"name":"a","description":"reads a and mails it away","inputSchema":{"type":"object"}}`
	toolB  = `{"name":"b","inputSchema":{"type":"object"}}`
	toolC  = `{"name":"c","inputSchema":{"type":"object"}}`
)

func TestCheckProfile(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*v1.ProfileDocument)
		condition string
		reason    string
	}{
		{name: "reviewed profile passes"},
		{name: "wrong contract", mutate: func(d *v1.ProfileDocument) { d.Contract = "b10x.connector-mcp-service.v2" }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "unreviewed effect", mutate: func(d *v1.ProfileDocument) { d.Operations[0].Effect = v1.EffectUnreviewed }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "unmapped tool", mutate: func(d *v1.ProfileDocument) { d.Operations = d.Operations[:1] }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "operation maps unknown tool", mutate: func(d *v1.ProfileDocument) { d.Operations[1].RemoteName = "zzz" }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "tool mapped twice", mutate: func(d *v1.ProfileDocument) { d.Operations[1].RemoteName = d.Operations[0].RemoteName }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "duplicate operationRef", mutate: func(d *v1.ProfileDocument) { d.Operations[1].OperationRef = d.Operations[0].OperationRef }, condition: v1.ConditionSourceVerified, reason: v1.ReasonProfileInvalid},
		{name: "tampered descriptor", mutate: func(d *v1.ProfileDocument) { d.Snapshot.Tools[0].Descriptor.Raw = []byte(toolAx) }, condition: v1.ConditionSnapshotReconstructed, reason: v1.ReasonSnapshotDigestMismatch},
		{name: "tampered snapshot digest", mutate: func(d *v1.ProfileDocument) {
			d.Snapshot.Digest = "sha256:" + strings.Repeat("0", 64)
		}, condition: v1.ConditionSnapshotReconstructed, reason: v1.ReasonSnapshotDigestMismatch},
		{name: "protocol changed after recording", mutate: func(d *v1.ProfileDocument) { d.Snapshot.ProtocolVersion = "2025-11-25" }, condition: v1.ConditionSnapshotReconstructed, reason: v1.ReasonSnapshotDigestMismatch},
		{name: "descriptor with duplicate key", mutate: func(d *v1.ProfileDocument) {
			d.Snapshot.Tools[1].Descriptor.Raw = []byte(`{"name":"b","name":"b"}`)
		}, condition: v1.ConditionSnapshotReconstructed, reason: v1.ReasonSnapshotDigestMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := testDoc(t, "2026-07-28", toolA, toolB)
			if tc.mutate != nil {
				tc.mutate(doc)
			}
			rec, serr := activation.CheckProfile(doc)
			if tc.reason == "" {
				if serr != nil {
					t.Fatalf("refused: %v", serr)
				}
				if rec.Digest != doc.Snapshot.Digest || len(rec.Tools) != 2 {
					t.Fatalf("recorded snapshot = %+v", rec)
				}
				return
			}
			if serr == nil {
				t.Fatal("accepted")
			}
			if serr.Condition() != tc.condition || serr.Reason() != tc.reason || serr.Transient() {
				t.Fatalf("got %s/%s transient=%v, want %s/%s", serr.Condition(), serr.Reason(), serr.Transient(), tc.condition, tc.reason)
			}
			if !errors.Is(serr, activation.ErrStage) {
				t.Fatal("not ErrStage")
			}
		})
	}
}

func TestDecideMatch(t *testing.T) {
	rec := recorded(t, testDoc(t, "2026-07-28", toolA, toolB))
	cases := []struct {
		name    string
		live    *snapshot.ToolSnapshot
		matched bool
		want    v1.SnapshotDrift
	}{
		{name: "same tools", live: liveSnapshot(t, "2026-07-28", toolB, toolA), matched: true},
		{name: "same tools, other key order and whitespace", live: liveSnapshot(t, "2026-07-28", toolA2, toolB), matched: true},
		{name: "tool added", live: liveSnapshot(t, "2026-07-28", toolA, toolB, toolC),
			want: v1.SnapshotDrift{Added: []v1.ToolRef{{Name: "c", Digest: digestOf(t, toolC)}}}},
		{name: "tool removed", live: liveSnapshot(t, "2026-07-28", toolA),
			want: v1.SnapshotDrift{Removed: []v1.ToolRef{{Name: "b", Digest: digestOf(t, toolB)}}}},
		{name: "tool changed", live: liveSnapshot(t, "2026-07-28", toolAx, toolB),
			want: v1.SnapshotDrift{Changed: []v1.ChangedTool{{Name: "a", From: digestOf(t, toolA), To: digestOf(t, toolAx)}}}},
		{name: "protocol era changed", live: liveSnapshot(t, "2025-11-25", toolA, toolB),
			want: v1.SnapshotDrift{ProtocolFrom: "2026-07-28", ProtocolTo: "2025-11-25"}},
		{name: "nil live", live: nil,
			want: v1.SnapshotDrift{ProtocolFrom: "2026-07-28", Removed: []v1.ToolRef{{Name: "a", Digest: digestOf(t, toolA)}, {Name: "b", Digest: digestOf(t, toolB)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decideMatch(rec, tc.live)
			if d.Matched != tc.matched {
				t.Fatalf("matched = %v, want %v (diff %+v)", d.Matched, tc.matched, d.Diff)
			}
			if tc.matched {
				return
			}
			got, _ := json.Marshal(driftStatus(d.Diff))
			want, _ := json.Marshal(&tc.want)
			if string(got) != string(want) {
				t.Fatalf("drift = %s, want %s", got, want)
			}
			if s := driftSummary(d.Diff); !strings.HasPrefix(s, "the live tool list differs") {
				t.Fatalf("summary = %q", s)
			}
		})
	}
}

func TestDecideMatchRefusesDigestOnlyDifference(t *testing.T) {
	rec := recorded(t, testDoc(t, "2026-07-28", toolA))
	live := liveSnapshot(t, "2026-07-28", toolA)
	live.Digest = "sha256:" + strings.Repeat("1", 64)
	if decideMatch(rec, live).Matched {
		t.Fatal("a differing snapshot digest matched")
	}
}

func TestDriftSummaryCarriesNoDescriptorText(t *testing.T) {
	rec := recorded(t, testDoc(t, "2026-07-28", toolA))
	live := liveSnapshot(t, "2026-07-28", toolAx)
	s := driftSummary(decideMatch(rec, live).Diff)
	if strings.Contains(s, "mails") {
		t.Fatalf("summary leaks server prose: %q", s)
	}
	if !strings.Contains(s, `changed "a"`) {
		t.Fatalf("summary = %q", s)
	}
}

func recorded(t *testing.T, doc *v1.ProfileDocument) *snapshot.ToolSnapshot {
	t.Helper()
	rec, serr := activation.CheckProfile(doc)
	if serr != nil {
		t.Fatal(serr)
	}
	return rec
}

func digestOf(t *testing.T, raw string) string {
	t.Helper()
	d, err := snapshot.DescriptorDigest([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCheckBindings(t *testing.T) {
	cred := &v1.CredentialRef{Name: "tok", Key: "token"}
	base := func() *v1.ServiceDeploymentSpec {
		return &v1.ServiceDeploymentSpec{
			ProviderID:    "p",
			MCPConnection: v1.MCPConnection{URL: "https://mcp.example.com/mcp", CredentialRef: cred},
			Operations: []v1.OperationBinding{
				{OperationRef: "op-a", EndpointRef: "mcp_connection", CredentialRef: &v1.CredentialRef{Name: "tok", Key: "token"}, GrantRefs: []string{"g"}},
				{OperationRef: "op-b", EndpointRef: "mcp_connection", CredentialRef: &v1.CredentialRef{Name: "tok", Key: "token"}, GrantRefs: []string{"g"}},
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(*v1.ServiceDeploymentSpec)
		reason string
		msg    string
	}{
		{name: "exact binding passes"},
		{name: "missing operation", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations = s.Operations[:1] }, reason: v1.ReasonOperationSetMismatch, msg: `missing "op-b"`},
		{name: "unknown operation", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations[1].OperationRef = "op-z" }, reason: v1.ReasonOperationSetMismatch, msg: `unknown "op-z"`},
		{name: "wrong endpoint ref", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations[0].EndpointRef = "other" }, reason: v1.ReasonEndpointRefInvalid},
		{name: "credential ref missing", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations[1].CredentialRef = nil }, reason: v1.ReasonCredentialRefMismatch},
		{name: "credential ref other key", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations[1].CredentialRef.Key = "other" }, reason: v1.ReasonCredentialRefMismatch},
		{name: "credential ref where connection has none", mutate: func(s *v1.ServiceDeploymentSpec) { s.MCPConnection.CredentialRef = nil }, reason: v1.ReasonCredentialRefMismatch},
		{name: "no credential anywhere passes", mutate: func(s *v1.ServiceDeploymentSpec) {
			s.MCPConnection.CredentialRef = nil
			for i := range s.Operations {
				s.Operations[i].CredentialRef = nil
			}
		}},
		{name: "no grant", mutate: func(s *v1.ServiceDeploymentSpec) { s.Operations[0].GrantRefs = nil }, reason: v1.ReasonGrantNotFound},
	}
	doc := testDoc(t, "2026-07-28", toolA, toolB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			if tc.mutate != nil {
				tc.mutate(s)
			}
			serr := checkBindings(doc, s)
			if tc.reason == "" {
				if serr != nil {
					t.Fatalf("refused: %v", serr)
				}
				return
			}
			if serr == nil || serr.Reason() != tc.reason || serr.Condition() != v1.ConditionBound {
				t.Fatalf("got %v, want reason %s", serr, tc.reason)
			}
			if !strings.Contains(serr.Message(), tc.msg) {
				t.Fatalf("message %q lacks %q", serr.Message(), tc.msg)
			}
		})
	}
}

func TestRulesAllowInvoke(t *testing.T) {
	grp := "connectors.b10x.io"
	cases := []struct {
		name  string
		rules []rbacv1.PolicyRule
		allow bool
	}{
		{"invoke on this name", []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}, ResourceNames: []string{"sd"}}}, true},
		{"invoke on all names", []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}}}, true},
		{"invoke on another name", []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}, ResourceNames: []string{"other"}}}, false},
		{"get only", []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}}}, false},
		{"other group", []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{"example.com"}, Resources: []string{"servicedeployments"}}}, false},
		{"other resource", []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{grp}, Resources: []string{"mcpserviceprofiles"}}}, false},
		{"wildcards as RBAC applies them", []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}, true},
		{"second rule allows", []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}},
			{Verbs: []string{"invoke"}, APIGroups: []string{grp}, Resources: []string{"servicedeployments"}, ResourceNames: []string{"x", "sd"}},
		}, true},
		{"no rules", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rulesAllowInvoke(tc.rules, "sd"); got != tc.allow {
				t.Fatalf("allow = %v, want %v", got, tc.allow)
			}
		})
	}
}

func TestFindCollision(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	first := bundleClaim{Key: "ns/first", Created: t0, Provider: "p1", Authority: "https://a:443/mcp", Operations: []string{"conn/op-a"}}
	cases := []struct {
		name   string
		self   bundleClaim
		reason string
	}{
		{name: "distinct", self: bundleClaim{Key: "ns/second", Created: t1, Provider: "p2", Authority: "https://b:443/mcp", Operations: []string{"conn2/op-a"}}},
		{name: "same provider", self: bundleClaim{Key: "ns/second", Created: t1, Provider: "p1", Authority: "https://b:443/mcp"}, reason: v1.ReasonProviderCollision},
		{name: "same endpoint", self: bundleClaim{Key: "ns/second", Created: t1, Provider: "p2", Authority: "https://a:443/mcp"}, reason: v1.ReasonAuthorityCollision},
		{name: "same operation of the Connection", self: bundleClaim{Key: "ns/second", Created: t1, Provider: "p2", Authority: "https://b:443/mcp", Operations: []string{"conn/op-a"}}, reason: v1.ReasonOperationCollision},
		{name: "first keeps it even when created at the same time (name order)", self: bundleClaim{Key: "ns/zzz", Created: t0, Provider: "p1"}, reason: v1.ReasonProviderCollision},
		{name: "earlier object is never refused", self: bundleClaim{Key: "ns/early", Created: metav1.NewTime(t0.Add(-time.Minute)), Provider: "p1", Authority: "https://a:443/mcp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serr := findCollision(tc.self, []bundleClaim{first, tc.self})
			if tc.reason == "" {
				if serr != nil {
					t.Fatalf("refused: %v", serr)
				}
				return
			}
			if serr == nil || serr.Reason() != tc.reason {
				t.Fatalf("got %v, want %s", serr, tc.reason)
			}
			if !strings.Contains(serr.Message(), "ns/first") {
				t.Fatalf("message %q does not name the holder", serr.Message())
			}
		})
	}
}

// A holder in another namespace is never named (neither its namespace nor its name); one in the
// same namespace is.
func TestFindCollisionDoesNotNameAnotherNamespace(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	holder := bundleClaim{Key: "team-secret/payroll-bridge", Created: t0, Provider: "p", Authority: "https://h:443/mcp"}
	self := bundleClaim{Key: "tenant/probe", Created: metav1.NewTime(t0.Add(time.Minute)), Provider: "q", Authority: "https://h:443/mcp"}
	serr := findCollision(self, []bundleClaim{holder, self})
	if serr == nil || serr.Reason() != v1.ReasonAuthorityCollision {
		t.Fatalf("got %v, want %s", serr, v1.ReasonAuthorityCollision)
	}
	if strings.Contains(serr.Message(), "team-secret") || strings.Contains(serr.Message(), "payroll") || !strings.Contains(serr.Message(), "another deployment") {
		t.Fatalf("message %q names another namespace's object", serr.Message())
	}
	sameNS := bundleClaim{Key: "tenant/first", Created: t0, Provider: "p", Authority: "https://h:443/mcp"}
	if serr := findCollision(self, []bundleClaim{sameNS, self}); serr == nil || !strings.Contains(serr.Message(), "ServiceDeployment tenant/first") {
		t.Fatalf("same-namespace holder not named: %v", serr)
	}
}

func TestFindCollisionNamesEarliestHolder(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	a := bundleClaim{Key: "ns/a", Created: metav1.NewTime(t0.Add(2 * time.Minute)), Provider: "p"}
	b := bundleClaim{Key: "ns/b", Created: t0, Provider: "x", Authority: "https://h:443/"}
	self := bundleClaim{Key: "ns/c", Created: metav1.NewTime(t0.Add(3 * time.Minute)), Provider: "p", Authority: "https://h:443/"}
	serr := findCollision(self, []bundleClaim{a, b, self})
	if serr == nil || serr.Reason() != v1.ReasonAuthorityCollision || !strings.Contains(serr.Message(), "ns/b") {
		t.Fatalf("got %v", serr)
	}
}

func TestNormalizeEndpoint(t *testing.T) {
	cases := map[string]string{ //nolint:gosec // test URLs with a fake userinfo
		"https://MCP.Example.com/mcp":             "https://mcp.example.com:443/mcp",
		"https://user:pw@mcp.example.com:443/mcp": "https://mcp.example.com:443/mcp",
		"https://mcp.example.com/mcp?x=1#f":       "https://mcp.example.com:443/mcp",
		"http://127.0.0.1:8080":                   "http://127.0.0.1:8080/",
		"https://[::1]/mcp":                       "https://[::1]:443/mcp",
		// A trailing dot names the same host; escapes of unreserved characters are the
		// characters; other escapes are upper-cased, never decoded (%2F stays a byte of a segment).
		"https://mcp.example.com./mcp":   "https://mcp.example.com:443/mcp",
		"https://MCP.example.com.:0443/": "https://mcp.example.com:443/",
		"https://h/%6d%63%70":            "https://h:443/mcp",
		"https://h/a%2fb":                "https://h:443/a%2Fb",
		"https://h/a%2Fb":                "https://h:443/a%2Fb",
		"https://h/%7e%41":               "https://h:443/~A",
	}
	for in, want := range cases {
		got, err := normalizeEndpoint(in)
		if err != nil || got != want {
			t.Errorf("normalizeEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// Twins: a different segment, an escaped slash versus a real one, another port.
	for a, b := range map[string]string{
		"https://h/a%2Fb": "https://h/a/b",
		"https://h/mcp":   "https://h/mcp2",
		"https://h./mcp":  "https://h:8443/mcp",
	} {
		na, _ := normalizeEndpoint(a)
		nb, _ := normalizeEndpoint(b)
		if na == nb {
			t.Errorf("%q and %q normalize alike (%q)", a, b, na)
		}
	}
	for _, bad := range []string{"ftp://x/", "https:///mcp", "://", "https://./mcp", "https://h:99999/"} {
		if _, err := normalizeEndpoint(bad); err == nil {
			t.Errorf("normalizeEndpoint(%q) accepted", bad)
		}
	}
}

func TestSanitizeURL(t *testing.T) {
	got := activation.SanitizeURL("https://user:secret@mcp.example.com:8443/mcp?token=abc#frag")
	if got != "https://mcp.example.com:8443/mcp" {
		t.Fatalf("SanitizeURL = %q", got)
	}
}

func TestNextVerification(t *testing.T) {
	last := time.Date(2026, 11, 30, 12, 0, 7, 0, time.UTC)
	a := nextVerification(last, time.Hour, 0.2, "uid-a")
	if a != nextVerification(last, time.Hour, 0.2, "uid-a") {
		t.Fatal("not deterministic")
	}
	// Between jitter×interval and (1+jitter)×interval after the last freeze; once at its point,
	// exactly one interval on.
	for i := range 200 {
		seed := fmt.Sprintf("uid-%d", i)
		n := nextVerification(last, time.Hour, 0.2, seed)
		if n.Before(last.Add(12*time.Minute)) || !n.Before(last.Add(72*time.Minute)) {
			t.Fatalf("%s: %v outside [12m, 1h12m)", seed, n.Sub(last))
		}
		if n != n.Truncate(time.Second) {
			t.Fatalf("%s: %v is not on a whole second", seed, n)
		}
		if again := nextVerification(n, time.Hour, 0.2, seed); again.Sub(n) != time.Hour {
			t.Fatalf("%s: frozen at its point, next after %v, want exactly the interval", seed, again.Sub(n))
		}
		if late := nextVerification(n.Add(900*time.Millisecond), time.Hour, 0.2, seed); late.Sub(n) != time.Hour {
			t.Fatalf("%s: frozen just after its point, next after %v, want its next point", seed, late.Sub(n))
		}
	}
	if nextVerification(last, time.Hour, 0, "x") != last.Add(time.Hour) {
		t.Fatal("zero jitter must be exact")
	}
}

// Deployments frozen together spread their re-verifications evenly over the interval: the first
// re-verifications of 10,000 deployments frozen in the same second fall into 60 one-minute
// buckets of an hour's interval, none with more than 1.25× the even share.
func TestNextVerificationSpreadsABulkEvenly(t *testing.T) {
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n, buckets = 10000, 60
	var count [buckets]int
	for i := range n {
		next := nextVerification(last, time.Hour, 0.1, fmt.Sprintf("%08x-uid", i))
		count[int(next.Sub(last.Add(6*time.Minute))/time.Minute)%buckets]++
	}
	even := n / buckets
	for b, c := range count {
		if c > even*5/4 || c < even*3/4 {
			t.Fatalf("minute %d holds %d re-verifications, want about %d: %v", b, c, even, count)
		}
	}
}

// The credential hash is an HMAC under the operator-held key: stable for the same key (across
// restarts), different under another key (a reader of status without the key cannot confirm a
// guessed value), and never the value.
func TestCredentialHash(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	h := credentialHash(key, "uid", []byte("s3cret"))
	if len(h) != 69 || !strings.HasPrefix(h, "hmac:") || strings.Contains(h, "s3cret") {
		t.Fatalf("hash = %q", h)
	}
	if h != credentialHash(append([]byte(nil), key...), "uid", []byte("s3cret")) {
		t.Fatal("the same key gave another hash")
	}
	if h == credentialHash(key, "uid", []byte("s3cret2")) || h == credentialHash(key, "uid2", []byte("s3cret")) {
		t.Fatal("hash ignores value or uid")
	}
	if h == credentialHash([]byte("fedcba9876543210fedcba9876543210"), "uid", []byte("s3cret")) {
		t.Fatal("hash ignores the key")
	}
	sum := sha256.Sum256([]byte("connector-mcp credential v1\x00uid\x00s3cret"))
	if strings.HasSuffix(h, hex.EncodeToString(sum[:])) {
		t.Fatal("hash is a plain digest anyone can recompute")
	}
}

// Every binding refusal maps onto its own reason; only the ones that can clear by themselves
// are retried; no message carries the ceiling or a Secret's value.
func TestBindingStageError(t *testing.T) {
	ref := egress.CredentialRef{Name: "tok", Key: "token"}
	for _, c := range []struct {
		err       error
		reason    string
		transient bool
		says      string
	}{
		{&k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn}, v1.ReasonCredentialNotFound, true, "credential_not_opted_in"},
		{&k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialHostNotAllowed}, v1.ReasonCredentialRefused, false, "credential_host_not_allowed"},
		{&k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialServiceAccountToken}, v1.ReasonCredentialRefused, false, "credential_service_account_token"},
		{&egress.CredentialError{Ref: ref, Reason: "key not found"}, v1.ReasonCredentialNotFound, true, "key not found"},
		{&k8sbinding.CeilingError{Entry: "10.0.0.0/8"}, v1.ReasonEndpointRefused, false, "egress_ceiling_exceeded"},
		{fmt.Errorf("%w: boom", k8sbinding.ErrClusterPolicyUnavailable), v1.ReasonProgressing, true, "could not be read"},
		{&egress.DestinationError{Addr: "169.254.169.254:80", Reason: "metadata"}, v1.ReasonEndpointRefused, false, "destination_refused"},
	} {
		serr := activation.ClassifyBindingError(c.err)
		if serr.Reason() != c.reason || serr.Transient() != c.transient || serr.Condition() != v1.ConditionBound || !strings.Contains(serr.Message(), c.says) {
			t.Errorf("%v: got %s transient=%v %q", c.err, serr.Reason(), serr.Transient(), serr.Message())
		}
		if strings.Contains(serr.Message(), "metadata") || strings.Contains(serr.Message(), "169.254") {
			t.Errorf("%v: message says which rule refused: %q", c.err, serr.Message())
		}
	}
}
