package ocitest

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
)

// KeylessCA is a self-hosted Fulcio CA whose certificates carry GitHub-style source extensions,
// with the sigstore-go VirtualSigstore's timestamp authority, for keyless signing in tests with no
// network. TrustedRootJSON is the trusted_root.json naming both.
type KeylessCA struct {
	// TrustedRootJSON is the sigstore trusted_root.json of the CA and the TSA.
	TrustedRootJSON []byte

	vs       *ca.VirtualSigstore
	inter    *x509.Certificate
	interKey crypto.Signer
}

// CertifiedIdentity is what a keyless certificate certifies: the signer's subject (a URI SAN)
// and OIDC issuer, and the build's source repository URI, ref and revision (Fulcio extensions).
type CertifiedIdentity struct {
	Subject, Issuer                    string
	RepositoryURI, Ref, RevisionDigest string
}

// NewKeylessCA creates the CA, the TSA and their trusted root.
func NewKeylessCA() (*KeylessCA, error) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		return nil, err
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		return nil, err
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		return nil, err
	}
	fulcio := &root.FulcioCertificateAuthority{Root: rootCert, Intermediates: []*x509.Certificate{inter},
		ValidityPeriodStart: time.Now().Add(-time.Hour), URI: "https://fulcio.example"}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fulcio}, nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		return nil, err
	}
	raw, err := tr.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &KeylessCA{TrustedRootJSON: raw, vs: vs, inter: inter, interKey: interKey}, nil
}

// Certificate issues a short-lived code-signing certificate (DER) for pub certifying id.
func (k *KeylessCA) Certificate(pub crypto.PublicKey, id CertifiedIdentity) ([]byte, error) {
	san, err := url.Parse(id.Subject)
	if err != nil {
		return nil, fmt.Errorf("subject: %w", err)
	}
	var exts []pkix.Extension
	for _, e := range []struct {
		oid asn1.ObjectIdentifier
		val string
	}{
		{certificate.OIDIssuerV2, id.Issuer},
		{certificate.OIDSourceRepositoryURI, id.RepositoryURI},
		{certificate.OIDSourceRepositoryRef, id.Ref},
		{certificate.OIDSourceRepositoryDigest, id.RevisionDigest},
	} {
		if e.val == "" {
			continue
		}
		der, err := asn1.MarshalWithParams(e.val, "utf8")
		if err != nil {
			return nil, err
		}
		exts = append(exts, pkix.Extension{Id: e.oid, Value: der})
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), URIs: []*url.URL{san},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: exts}
	return x509.CreateCertificate(rand.Reader, tmpl, k.inter, pub, k.interKey)
}

// Timestamp is an RFC 3161 timestamp response over sig from the TSA.
func (k *KeylessCA) Timestamp(sig []byte) ([]byte, error) { return k.vs.TimestampResponse(sig) }
