package ociregistry

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	oras "oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
	k8sjson "sigs.k8s.io/json"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/netcause"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// CreatedEpoch is the org.opencontainers.image.created annotation of packs built by Push: a fixed
// value, so that the same reviewed profiles always pack to the same manifest digest.
const CreatedEpoch = "1970-01-01T00:00:00Z"

// Client talks to an OCI registry for profile packs. The zero value reaches registries over HTTPS
// with http.DefaultClient, anonymously, with DefaultLimits.
type Client struct {
	// HTTPClient carries every registry request. Hosted deployments set the egress guarded client
	// here (IP policy at dial time, no proxy from the environment, bounded redirects).
	HTTPClient *http.Client
	// Credentials returns registry credentials for a host; nil means anonymous. See
	// CredentialsFromDockerConfig.
	Credentials auth.CredentialFunc
	// PlainHTTP reaches the registry without TLS. It is refused ("plain_http_not_loopback") for any
	// registry that is not localhost or a loopback IP literal.
	PlainHTTP bool
	// Limits bound manifests, layers, bundles and referrers; zero fields take DefaultLimits.
	Limits Limits
	// Store, when set, stands in for the registry while it is unavailable (a transport error, a
	// 5xx or 429; never a 404 or an authentication refusal): Pull and Bundles then read the
	// content a Verifier saved after its last successful verification of the pack, every blob
	// checked against its digest. A Client with Credentials does not use it. See BlobStore.
	Store BlobStore
}

// Pack is a profile pack pulled by digest: every byte was read through a digest-verifying reader
// within the client's limits, every layer decoded strictly and validated.
type Pack struct {
	// Reference is the pack reference, pinned by digest.
	Reference Reference
	// Manifest is the raw pack manifest (its sha256 is Reference.Digest).
	Manifest []byte
	// Layers are the raw layer bytes, in manifest order.
	Layers [][]byte
	// Profiles are the decoded and validated profile documents, in manifest order.
	Profiles []*apiv1.ProfileDocument
	// Snapshots are the recorded snapshots the validation of Profiles reconstructed (Reviewed),
	// in the same order. Treat them as read-only.
	Snapshots []*snapshot.ToolSnapshot

	// layers are the manifest's layer descriptors (digests of Layers).
	layers []ocispec.Descriptor
}

func (c *Client) limits() Limits { return c.Limits.withDefaults() }

// repository returns an oras repository for ref, refusing plain HTTP to non-loopback hosts.
func (c *Client) repository(ref Reference) (*remote.Repository, error) {
	if c.PlainHTTP && !IsLoopbackHost(ref.Registry) {
		return nil, refuse(ocipack.RefusalPlainHTTPNotLoopback, ref.Registry, ocipack.ErrPlainHTTPNotLoopback)
	}
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidReference, "", ocipack.ErrInvalidReference)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	checked := *hc // the caller's client (egress policy, redirect checks) is kept; only wrapped
	checked.Transport = contentCheckTransport{base: hc.Transport}
	repo.Client = &auth.Client{Client: &checked, Credential: c.Credentials, Cache: auth.NewCache()}
	repo.PlainHTTP = c.PlainHTTP
	repo.MaxMetadataBytes = c.limits().MaxManifestBytes
	repo.ReferrerListMaxPages = 4
	repo.SkipReferrersGC = true
	return repo, nil
}

// Push validates each profile (ReviewedChecks: drafts are refused), encodes it as a canonical
// JSON layer and pushes a pack manifest to the repository repo. It returns the pack reference
// pinned by digest. Pushing the same profiles again yields the same digest.
func (c *Client) Push(ctx context.Context, repo Reference, profiles []*apiv1.ProfileDocument) (Reference, error) {
	lim := c.limits()
	if len(profiles) == 0 {
		return Reference{}, refuse(ocipack.RefusalInvalidPack, "layers", ocipack.ErrInvalidPack)
	}
	if len(profiles) > lim.MaxLayers {
		return Reference{}, refuse(ocipack.RefusalTooManyLayers, "layers", ocipack.ErrTooManyLayers)
	}
	r, err := c.repository(repo)
	if err != nil {
		return Reference{}, err
	}
	services := make(map[string]bool, len(profiles))
	for i, p := range profiles {
		if p != nil && services[p.Service.Ref] {
			return Reference{}, refuse(ocipack.RefusalDuplicateService, fmt.Sprintf("layers[%d]", i), ocipack.ErrInvalidPack)
		}
		if p != nil {
			services[p.Service.Ref] = true
		}
	}
	layers := make([]ocispec.Descriptor, 0, len(profiles))
	for i, p := range profiles {
		if err := ocipack.Validate(p); err != nil {
			return Reference{}, fmt.Errorf("profile %d: %w", i, err)
		}
		b, err := ocipack.EncodeProfile(p, ocipack.FormatJSON)
		if err != nil {
			return Reference{}, err
		}
		if int64(len(b)) > lim.MaxLayerBytes {
			return Reference{}, refuse(ocipack.RefusalLayerTooLarge, fmt.Sprintf("layers[%d]", i), ocipack.ErrLayerTooLarge)
		}
		d := content.NewDescriptorFromBytes(ocipack.ProfileMediaType, b)
		d.Annotations = map[string]string{ocispec.AnnotationTitle: p.Service.Ref + ".json"}
		if err := pushBlob(ctx, r, d, b); err != nil {
			return Reference{}, err
		}
		layers = append(layers, d)
	}
	desc, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, ocipack.PackArtifactType, oras.PackManifestOptions{
		Layers:              layers,
		ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: CreatedEpoch},
	})
	if err != nil {
		return Reference{}, registryError("push", err)
	}
	out := repo
	out.Digest = desc.Digest.String()
	return out, nil
}

func pushBlob(ctx context.Context, r *remote.Repository, d ocispec.Descriptor, b []byte) error {
	if ok, err := r.Exists(ctx, d); err == nil && ok {
		return nil
	}
	if err := r.Push(ctx, d, bytes.NewReader(b)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return registryError("push", err)
	}
	return nil
}

// Pull fetches the pack ref (which must be pinned by digest) within the client's limits, every
// blob through a digest-verifying reader, then decodes every layer strictly and validates it.
// While the registry is unavailable, a Client with a Store reads the stored copy instead.
func (c *Client) Pull(ctx context.Context, ref Reference) (*Pack, error) {
	p, _, err := c.pull(ctx, ref)
	return p, err
}

// pull is Pull, reporting whether the pack was read from the store.
func (c *Client) pull(ctx context.Context, ref Reference) (*Pack, bool, error) {
	if ref.Digest == "" {
		return nil, false, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	r, err := c.repository(ref)
	if err != nil {
		return nil, false, err
	}
	p, err := c.pullFrom(ctx, ref, registrySource{r})
	if err == nil {
		return p, false, nil
	}
	return withStore(ctx, c, ref, err, func(src contentSource) (*Pack, error) { return c.pullFrom(ctx, ref, src) })
}

// pullFrom reads and checks the pack ref from src.
func (c *Client) pullFrom(ctx context.Context, ref Reference, src contentSource) (*Pack, error) {
	lim := c.limits()
	mb, err := src.manifest(ctx, ref.Digest, lim.MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(mb, lim)
	if err != nil {
		return nil, err
	}
	p := &Pack{Reference: ref, Manifest: mb, layers: m.Layers}
	for i, l := range m.Layers {
		b, err := src.blob(ctx, l)
		if err != nil {
			return nil, err
		}
		doc, err := ocipack.DecodeProfile(b)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		snap, err := ocipack.Reviewed(doc)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		for _, prev := range p.Profiles {
			if prev.Service.Ref == doc.Service.Ref {
				return nil, refuse(ocipack.RefusalDuplicateService, fmt.Sprintf("layers[%d]", i), ocipack.ErrInvalidPack)
			}
		}
		p.Layers = append(p.Layers, b)
		p.Profiles = append(p.Profiles, doc)
		p.Snapshots = append(p.Snapshots, snap)
	}
	return p, nil
}

// Profile returns the profile of the pack whose service reference is serviceRef; with an empty
// serviceRef, the pack must hold exactly one profile. Otherwise it is a *RefusalError
// "profile_not_in_pack" (or "ambiguous_pack" for an empty serviceRef and several profiles).
func (p *Pack) Profile(serviceRef string) (*apiv1.ProfileDocument, error) {
	doc, _, err := p.ProfileSnapshot(serviceRef)
	return doc, err
}

// ProfileSnapshot is Profile that also returns the profile's recorded snapshot, reconstructed when
// the pack was pulled (nil for a Pack not built by Pull).
func (p *Pack) ProfileSnapshot(serviceRef string) (*apiv1.ProfileDocument, *snapshot.ToolSnapshot, error) {
	at := func(i int) (*apiv1.ProfileDocument, *snapshot.ToolSnapshot, error) {
		if i < len(p.Snapshots) {
			return p.Profiles[i], p.Snapshots[i], nil
		}
		return p.Profiles[i], nil, nil
	}
	if serviceRef == "" {
		if len(p.Profiles) == 1 {
			return at(0)
		}
		return nil, nil, refuse(ocipack.RefusalAmbiguousPack, "", ocipack.ErrProfileNotInPack)
	}
	for i, d := range p.Profiles {
		if d.Service.Ref == serviceRef {
			return at(i)
		}
	}
	return nil, nil, refuse(ocipack.RefusalProfileNotInPack, serviceRef, ocipack.ErrProfileNotInPack)
}

// registrySource reads content from a registry repository.
type registrySource struct{ r *remote.Repository }

func (s registrySource) manifest(ctx context.Context, dgst string, max int64) ([]byte, error) {
	return fetchManifest(ctx, s.r, dgst, max)
}

func (s registrySource) blob(ctx context.Context, desc ocispec.Descriptor) ([]byte, error) {
	return fetchBlob(ctx, s.r, desc)
}

func (s registrySource) referrers(ctx context.Context, subject ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error {
	err := s.r.Referrers(ctx, subject, ocipack.BundleMediaType, fn)
	if err != nil && !errors.Is(err, errdef.ErrNotFound) {
		return registryError("referrers", err)
	}
	return nil
}

// fetchManifest fetches the manifest named by dgst, bounded by max and verified against dgst.
func fetchManifest(ctx context.Context, r *remote.Repository, dgst string, max int64) ([]byte, error) {
	// The HEAD answer must carry no other Docker-Content-Digest; its size is not known yet.
	x := &fetchExpect{desc: ocispec.Descriptor{Digest: digest.Digest(dgst), Size: -1}}
	desc, err := r.Resolve(context.WithValue(ctx, fetchExpectKey{}, x), dgst)
	if err != nil {
		if errors.Is(err, errServedMismatch) {
			return nil, refuse(ocipack.RefusalBlobDigestMismatch, dgst, ocipack.ErrBlobDigestMismatch)
		}
		return nil, registryError("resolve", err)
	}
	if desc.Size > max {
		return nil, refuse(ocipack.RefusalManifestTooLarge, "", ocipack.ErrManifestTooLarge)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, refuse(ocipack.RefusalInvalidPack, "mediaType", ocipack.ErrInvalidPack)
	}
	desc.Digest = digest.Digest(dgst) // never trust the digest the registry reports
	return fetchBlob(ctx, r, desc)
}

// fetchBlob reads exactly desc.Size bytes that must hash to desc.Digest. Content that does not
// match its descriptor — another length, declared (Content-Length, refused before oras-go sees
// it) or actual (short or trailing body), another Docker-Content-Digest, or other bytes of the
// same length — is the refusal "blob_digest_mismatch"; a transfer that breaks off stays a
// RegistryError (retried).
func fetchBlob(ctx context.Context, r *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	x := &fetchExpect{desc: desc}
	rc, err := r.Fetch(context.WithValue(ctx, fetchExpectKey{}, x), desc)
	if err != nil {
		if errors.Is(err, errServedMismatch) || errors.Is(err, content.ErrMismatchedDigest) {
			return nil, refuse(ocipack.RefusalBlobDigestMismatch, desc.Digest.String(), ocipack.ErrBlobDigestMismatch)
		}
		return nil, registryError("fetch", err)
	}
	defer rc.Close()
	b, err := content.ReadAll(io.LimitReader(rc, desc.Size+1), desc)
	if err != nil {
		short := errors.Is(err, io.ErrUnexpectedEOF) && x.cleanEOF.Load()
		if short || errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) {
			return nil, refuse(ocipack.RefusalBlobDigestMismatch, desc.Digest.String(), ocipack.ErrBlobDigestMismatch)
		}
		return nil, registryError("fetch", err)
	}
	return b, nil
}

// errServedMismatch is returned by contentCheckTransport for a response that contradicts the
// descriptor it was requested by.
var errServedMismatch = errors.New("registry response contradicts the descriptor")

type fetchExpectKey struct{}

// fetchExpect is the descriptor a fetch expects (Size -1: not known yet), and whether the response
// body ended with a clean EOF (the server said "this is all": a short body is short content, not a
// broken transfer).
type fetchExpect struct {
	desc     ocispec.Descriptor
	cleanEOF atomic.Bool
}

// contentCheckTransport checks the 200 answer to a content GET made by fetchBlob, or the manifest
// HEAD made by fetchManifest (the blob or manifest URL of the expected digest, or a redirect from
// it), against the expected descriptor: a declared Content-Length other than its size (when
// known), or a Docker-Content-Digest other than its digest, is errServedMismatch. oras-go reports
// these as untyped errors that cannot be told from a network failure, so they are caught here
// first. Other requests (token, referrers, pushes, error statuses) pass unchanged.
type contentCheckTransport struct{ base http.RoundTripper }

func (t contentCheckTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return resp, err
	}
	x, ok := req.Context().Value(fetchExpectKey{}).(*fetchExpect)
	if !ok || !isContentRequest(req, x.desc.Digest.String()) {
		return resp, nil
	}
	dcd := resp.Header.Get("Docker-Content-Digest")
	if (x.desc.Size >= 0 && resp.ContentLength >= 0 && resp.ContentLength != x.desc.Size) || (dcd != "" && dcd != x.desc.Digest.String()) {
		resp.Body.Close()
		return nil, errServedMismatch
	}
	resp.Body = &eofBody{ReadCloser: resp.Body, clean: &x.cleanEOF}
	return resp, nil
}

// isContentRequest reports whether the first request of req's redirect chain (req itself when not
// redirected) is for the blob or manifest URL of dgst.
func isContentRequest(req *http.Request, dgst string) bool {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	p := req.URL.Path
	return strings.HasSuffix(p, "/blobs/"+dgst) || strings.HasSuffix(p, "/manifests/"+dgst)
}

// eofBody records whether the body ended with a clean io.EOF.
type eofBody struct {
	io.ReadCloser
	clean *atomic.Bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.clean.Store(true)
	}
	return n, err
}

// Referrer is one sigstore bundle attached to a pack.
type Referrer struct {
	// Descriptor is the referrer manifest's descriptor as listed by the registry.
	Descriptor ocispec.Descriptor
	// Bundle is the raw bundle JSON.
	Bundle []byte

	// manifest is the raw referrer manifest; layer its bundle layer's descriptor.
	manifest []byte
	layer    ocispec.Descriptor
}

// Bundles lists the sigstore bundles attached to the pack ref as OCI referrers with artifactType
// BundleMediaType (native referrers API, or the referrers tag schema when the registry has none),
// and fetches each within the limits. Referrer manifests whose subject is not the pack digest or
// whose shape is not one bundle layer are skipped. While the registry is unavailable, a Client
// with a Store reads the referrers listed, and their content, from the stored copy of the last
// successful verification instead.
func (c *Client) Bundles(ctx context.Context, ref Reference) ([]Referrer, error) {
	refs, _, err := c.bundles(ctx, ref)
	return refs, err
}

// bundles is Bundles, reporting whether the referrers were read from the store.
func (c *Client) bundles(ctx context.Context, ref Reference) ([]Referrer, bool, error) {
	if ref.Digest == "" {
		return nil, false, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	r, err := c.repository(ref)
	if err != nil {
		return nil, false, err
	}
	refs, err := c.bundlesFrom(ctx, ref, registrySource{r})
	if err == nil {
		return refs, false, nil
	}
	return withStore(ctx, c, ref, err, func(src contentSource) ([]Referrer, error) { return c.bundlesFrom(ctx, ref, src) })
}

// bundlesFrom lists and reads the bundle referrers of ref from src. Content from the registry
// that does not match its digest is skipped (no evidence; others may verify); stored content
// that does not match fails the listing (ErrStoredMismatch).
func (c *Client) bundlesFrom(ctx context.Context, ref Reference, src contentSource) ([]Referrer, error) {
	lim := c.limits()
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.Digest(ref.Digest)}
	var descs []ocispec.Descriptor
	err := src.referrers(ctx, subject, func(page []ocispec.Descriptor) error {
		for _, d := range page {
			if d.ArtifactType == ocipack.BundleMediaType && len(descs) < lim.MaxReferrers {
				descs = append(descs, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Referrer
	for _, d := range descs {
		if d.Size > lim.MaxManifestBytes {
			continue
		}
		mb, err := src.blob(ctx, d)
		if err != nil {
			if isRefusal(err) {
				continue // content that does not match its digest is no evidence; others may verify
			}
			return nil, err
		}
		var m ocispec.Manifest
		if k8sjson.UnmarshalCaseSensitivePreserveInts(mb, &m) != nil || m.Subject == nil || m.Subject.Digest.String() != ref.Digest ||
			len(m.Layers) != 1 || m.Layers[0].MediaType != ocipack.BundleMediaType || m.Layers[0].Size > lim.MaxBundleBytes {
			continue
		}
		b, err := src.blob(ctx, m.Layers[0])
		if err != nil {
			if isRefusal(err) {
				continue
			}
			return nil, err
		}
		out = append(out, Referrer{Descriptor: d, Bundle: b, manifest: mb, layer: m.Layers[0]})
	}
	return out, nil
}

// Attach pushes bundle (sigstore bundle JSON) and a referrer manifest whose subject is the pack
// ref, in the cosign --new-bundle-format layout: artifactType BundleMediaType, empty config, one
// bundle layer, annotations such as dev.sigstore.bundle.content and
// dev.sigstore.bundle.predicateType. Registries without the referrers API get the referrers tag
// schema index updated instead (oras-go does this).
func (c *Client) Attach(ctx context.Context, ref Reference, bundle []byte, annotations map[string]string) (ocispec.Descriptor, error) {
	if ref.Digest == "" {
		return ocispec.Descriptor{}, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	r, err := c.repository(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	subject, err := r.Resolve(ctx, ref.Digest)
	if err != nil {
		return ocispec.Descriptor{}, registryError("resolve", err)
	}
	if subject.Digest.String() != ref.Digest {
		return ocispec.Descriptor{}, refuse(ocipack.RefusalBlobDigestMismatch, ref.Digest, ocipack.ErrBlobDigestMismatch)
	}
	subject = ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	layer := content.NewDescriptorFromBytes(ocipack.BundleMediaType, bundle)
	if err := pushBlob(ctx, r, layer, bundle); err != nil {
		return ocispec.Descriptor{}, err
	}
	ann := map[string]string{}
	for k, v := range annotations {
		ann[k] = v
	}
	desc, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, ocipack.BundleMediaType, oras.PackManifestOptions{
		Subject:             &subject,
		Layers:              []ocispec.Descriptor{layer},
		ManifestAnnotations: ann,
	})
	if err != nil {
		return ocispec.Descriptor{}, registryError("attach", err)
	}
	return desc, nil
}

// RegistryError is a registry failure that is not a refusal (unreachable, unauthorized, not
// found). Its message names the operation and an HTTP status when known, never credentials or
// response bodies.
type RegistryError struct {
	// Op is the failed operation: "push", "resolve", "fetch", "referrers", "attach".
	Op string
	// Err is the underlying error (errdef.ErrNotFound and friends match with errors.Is).
	Err error
	// Stored, when the registry was unavailable and the client has a Store, names why the stored
	// copy could not stand in: StoredAbsent, StoredDigestMismatch or StoredUnreadable.
	Stored string
}

// RegistryOp returns Op. It lets the activation table (internal/activation) classify a registry
// failure without linking the registry client.
func (e *RegistryError) RegistryOp() string { return e.Op }

// Unavailable reports whether the registry could not serve at all: a transport failure (no
// connection, reset, broken-off transfer, timeout, TLS or dial-policy failure) or an HTTP 5xx or
// 429 answer. A 404, an authentication or authorization refusal, other 4xx answers and answers
// refused by the client (too large, malformed) are not unavailability: the registry answered.
func (e *RegistryError) Unavailable() bool {
	if errors.Is(e.Err, errdef.ErrNotFound) || errors.Is(e.Err, auth.ErrBasicCredentialNotFound) {
		return false
	}
	if s := statusOf(e.Err); s != 0 {
		return s >= 500 || s == http.StatusTooManyRequests
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(e.Err, &ue) || errors.As(e.Err, &ne) || errors.Is(e.Err, io.ErrUnexpectedEOF) ||
		errors.Is(e.Err, syscall.ECONNRESET) || errors.Is(e.Err, syscall.ECONNREFUSED)
}

func (e *RegistryError) Error() string {
	msg := "ocipack: registry " + e.Op + " failed"
	switch {
	case errors.Is(e.Err, errdef.ErrNotFound):
		msg += ": not found"
	case errors.Is(e.Err, auth.ErrBasicCredentialNotFound):
		msg += ": credentials required"
	case errors.Is(e.Err, context.DeadlineExceeded), errors.Is(e.Err, context.Canceled):
		msg += ": " + e.Err.Error()
	default:
		if s := statusOf(e.Err); s != 0 {
			msg += fmt.Sprintf(": HTTP %d", s)
		} else if c := netcause.Of(e.Err); c != "" {
			msg += ": " + c
		}
	}
	if e.Stored != "" {
		msg += " (stored copy: " + e.Stored + ")"
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *RegistryError) Unwrap() error { return e.Err }

func registryError(op string, err error) error {
	var r *ocipack.RefusalError
	if errors.As(err, &r) {
		return err
	}
	return &RegistryError{Op: op, Err: err}
}

func isRefusal(err error) bool {
	var r *ocipack.RefusalError
	return errors.As(err, &r)
}

// statusOf extracts an HTTP status from oras errors without their (registry-supplied) text.
func statusOf(err error) int {
	var er *errcode.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode
	}
	return 0
}

// CredentialsFromDockerConfig returns registry credentials from a Docker config file
// (~/.docker/config.json) or the content of a Kubernetes kubernetes.io/dockerconfigjson Secret
// (key .dockerconfigjson): both carry {"auths": {HOST: {"auth" | "username"+"password" |
// "identitytoken" | "registrytoken"}}}. Credential helpers and stores are not consulted.
func CredentialsFromDockerConfig(data []byte) (auth.CredentialFunc, error) {
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Username      string `json:"username"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	// Exact-case members and no duplicate keys: "Auths" or a second "auths" is not another way
	// to name the credentials.
	if err := snapshot.Unmarshal(data, &cfg); err != nil {
		return nil, refuse(ocipack.RefusalInvalidDockerConfig, "", ocipack.ErrInvalidDockerConfig)
	}
	creds := map[string]auth.Credential{}
	for host, a := range cfg.Auths {
		c := auth.Credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken, AccessToken: a.RegistryToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, refuse(ocipack.RefusalInvalidDockerConfig, "", ocipack.ErrInvalidDockerConfig)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, refuse(ocipack.RefusalInvalidDockerConfig, "", ocipack.ErrInvalidDockerConfig)
			}
			c.Username, c.Password = user, pass
		}
		creds[normalizeRegistryHost(host)] = c
	}
	return func(_ context.Context, hostport string) (auth.Credential, error) {
		if c, ok := creds[normalizeRegistryHost(hostport)]; ok {
			return c, nil
		}
		return auth.EmptyCredential, nil
	}, nil
}

// normalizeRegistryHost maps the host spellings found in Docker configs
// ("https://index.docker.io/v1/", "registry.example.com") to a host[:port].
func normalizeRegistryHost(h string) string {
	h = strings.TrimPrefix(strings.TrimPrefix(h, "https://"), "http://")
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	switch h {
	case "index.docker.io", "docker.io":
		return "registry-1.docker.io"
	}
	return h
}
