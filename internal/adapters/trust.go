package adapters

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/ocipack"
)

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcptrustpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Trust model names.
const (
	// TrustSourcePlatform names the manager's own trust source (its --default-* flags).
	TrustSourcePlatform = "platform"
	// TrustSourcePolicyPrefix prefixes the name of a trust source granted by an McpTrustPolicy:
	// "McpTrustPolicy/<name>".
	TrustSourcePolicyPrefix = "McpTrustPolicy/"
	// RefusalNoTrustSource is the refusal when no trust source applies to a profile's namespace
	// (condition reason UntrustedSigner).
	RefusalNoTrustSource = activation.StepNoTrustSource
	// RefusalProfilePolicy prefixes the refusal when the pack satisfies a trust source but not
	// the profile's own spec.source.oci.verify (the ocipack refusal name follows).
	RefusalProfilePolicy = activation.StepProfilePolicy
)

// Checks a manager may waive with an unsafe flag, as listed in status.verified.waivedChecks.
const (
	// WaivedProvenance: packs are accepted on a signature alone (--skip-provenance-unsafe).
	WaivedProvenance = "provenance"
	// WaivedKeylessTlog: keyless packs need no transparency-log entry
	// (--keyless-without-tlog-unsafe).
	WaivedKeylessTlog = "keyless_tlog"
)

// ErrNoTrustSource is the reason no trust source applies to a namespace.
var ErrNoTrustSource = errors.New("no trust source applies to the namespace")

// TrustSigner is one trusted signer of a trust source.
type TrustSigner struct {
	// Name identifies the signer within its source (status.verified.signer).
	Name string
	// Keyless is the Fulcio identity (issuer and exact or anchored subject); nil for a key.
	Keyless *v1.KeylessIdentity
	// PublicKey verifies key-signed packs; nil for keyless.
	PublicKey crypto.PublicKey
}

// TrustSource is one complete grant of trust: a pack verifies under it when it is signed by one
// of Signers AND its provenance satisfies one of Provenance. A signer of one source is never
// combined with a provenance rule of another.
type TrustSource struct {
	// Name is TrustSourcePlatform or TrustSourcePolicyPrefix + the McpTrustPolicy's name.
	Name string
	// Signers are the trusted identities.
	Signers []TrustSigner
	// Provenance are the accepted merge verifications.
	Provenance []v1.ProvenancePolicy
}

// TrustSourceFromPolicy converts an McpTrustPolicy. A signer whose key does not parse or whose
// subject expression is not anchored makes the whole policy invalid (it grants nothing): the
// error names the signer and the ocipack refusal.
func TrustSourceFromPolicy(p *v1.McpTrustPolicy) (TrustSource, error) {
	src := TrustSource{Name: TrustSourcePolicyPrefix + p.Name, Provenance: p.Spec.Provenance}
	for i, s := range p.Spec.Signers {
		ts := TrustSigner{Name: s.Name}
		switch {
		case s.Keyless != nil && s.PublicKeyPEM == "":
			if s.Keyless.SubjectRegExp != "" {
				if err := ociregistry.CheckSubjectRegExp(s.Keyless.SubjectRegExp); err != nil {
					return TrustSource{}, fmt.Errorf("spec.signers[%d]: %w", i, err)
				}
			}
			ts.Keyless = s.Keyless.DeepCopy()
		case s.Keyless == nil && s.PublicKeyPEM != "":
			k, err := ociregistry.ParsePublicKey([]byte(s.PublicKeyPEM))
			if err != nil {
				return TrustSource{}, fmt.Errorf("spec.signers[%d]: %w", i, err)
			}
			ts.PublicKey = k
		default:
			return TrustSource{}, fmt.Errorf("spec.signers[%d]: exactly one of keyless or publicKeyPEM: %w", i, ocipack.ErrInvalidPolicy)
		}
		src.Signers = append(src.Signers, ts)
	}
	return src, nil
}

// ApplicableSources is the pure selection of the trust sources for a namespace with labels
// nsLabels: platform (when not nil) first, then every McpTrustPolicy whose namespaceSelector
// selects the namespace, by name. Policies with an invalid selector or signer grant nothing;
// their names are returned in invalid.
func ApplicableSources(platform *TrustSource, policies []v1.McpTrustPolicy, nsLabels map[string]string) (sources []TrustSource, invalid []string) {
	if platform != nil {
		sources = append(sources, *platform)
	}
	sorted := slices.Clone(policies)
	slices.SortFunc(sorted, func(a, b v1.McpTrustPolicy) int { return strings.Compare(a.Name, b.Name) })
	for i := range sorted {
		p := &sorted[i]
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
		if err != nil {
			invalid = append(invalid, p.Name)
			continue
		}
		if !sel.Matches(labels.Set(nsLabels)) {
			continue
		}
		src, err := TrustSourceFromPolicy(p)
		if err != nil {
			invalid = append(invalid, p.Name)
			continue
		}
		sources = append(sources, src)
	}
	return sources, invalid
}

// Candidate says which source and signer an ocipack policy of Candidates stands for.
type Candidate struct {
	// Source is the trust source name.
	Source string
	// Signer is the signer name within Source.
	Signer string
}

// Candidates is the pure expansion of sources into the ocipack policies a pack may satisfy:
// every signer of a source with every provenance rule of the same source, in order. A source
// without provenance rules contributes nothing, unless skipProvenanceUnsafe is set, when each
// of its signers is accepted on its signature alone. The two slices are parallel.
func Candidates(sources []TrustSource, skipProvenanceUnsafe bool) ([]ociregistry.Policy, []Candidate) {
	var pols []ociregistry.Policy
	var cands []Candidate
	for _, src := range sources {
		for _, s := range src.Signers {
			if len(src.Provenance) == 0 && skipProvenanceUnsafe {
				pols = append(pols, ociregistry.Policy{Keyless: s.Keyless, PublicKey: s.PublicKey, SkipProvenanceUnsafe: true})
				cands = append(cands, Candidate{src.Name, s.Name})
			}
			for i := range src.Provenance {
				pols = append(pols, ociregistry.Policy{Keyless: s.Keyless, PublicKey: s.PublicKey, Provenance: &src.Provenance[i]})
				cands = append(cands, Candidate{src.Name, s.Name})
			}
		}
	}
	return pols, cands
}

// ProfilePolicy is the pure construction of the profile's own additional requirement, checked
// after the pack satisfied a trust source with policy satisfied. It returns nil when the
// profile adds nothing. The identity is the profile's (keyless, or the key read from its
// Secret, ownKey) or, when it names none, the satisfied signer's; the provenance is the
// profile's, or none: the trust source has already checked one, so the added check is then
// about the signer alone.
func ProfilePolicy(own *v1.VerifyPolicy, ownKey crypto.PublicKey, satisfied ociregistry.Policy) *ociregistry.Policy {
	if own == nil || (own.Keyless == nil && own.PublicKey == nil && own.Provenance == nil) {
		return nil
	}
	out := ociregistry.Policy{Keyless: satisfied.Keyless, PublicKey: satisfied.PublicKey}
	switch {
	case own.Keyless != nil:
		out.Keyless, out.PublicKey = own.Keyless, nil
	case own.PublicKey != nil:
		out.Keyless, out.PublicKey = nil, ownKey
	}
	if own.Provenance != nil {
		out.Provenance = own.Provenance
	} else {
		out.SkipProvenanceUnsafe = true // provenance already verified under the trust source
	}
	return &out
}

// trustSources reads the McpTrustPolicies and the namespace's labels and selects the sources
// that apply to ns.
func (v *PackVerifier) trustSources(ctx context.Context, ns string) ([]TrustSource, []v1.McpTrustPolicy, error) {
	var policies []v1.McpTrustPolicy
	var nsLabels map[string]string
	if v.Trust != nil {
		list := &v1.McpTrustPolicyList{}
		if err := v.Trust.List(ctx, list); err != nil {
			return nil, nil, err
		}
		policies = list.Items
		nsObj := &corev1.Namespace{}
		if err := v.Trust.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
			return nil, nil, err
		}
		nsLabels = nsObj.Labels
	}
	sources, invalid := ApplicableSources(v.Platform, policies, nsLabels)
	for _, name := range invalid {
		log.FromContext(ctx).Info("An McpTrustPolicy grants nothing: its selector or a signer is invalid", "mcpTrustPolicy", name)
	}
	var applied []v1.McpTrustPolicy
	for _, p := range policies {
		for _, s := range sources {
			if s.Name == TrustSourcePolicyPrefix+p.Name {
				applied = append(applied, p)
			}
		}
	}
	return sources, applied, nil
}

// TrustFingerprint identifies the trust that applies to namespace ns: the McpTrustPolicies that
// select it, each at its metadata.generation (which changes with the spec, not with the status
// the manager writes). The resolver keys its memo on it, so a granted, changed or revoked
// policy, or a relabelled namespace, is noticed at the next reconcile.
func (v *PackVerifier) TrustFingerprint(ctx context.Context, ns string) (string, error) {
	_, applied, err := v.trustSources(ctx, ns)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range applied {
		fmt.Fprintf(h, "%s@%s/%d\n", p.Name, p.UID, p.Generation)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
