package appoptions

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// TLS is the configuration of every outbound TLS connection of the process.
type TLS struct {
	// CABundleFile (--ca-bundle-file) is a PEM file of extra CA certificates trusted, beside the
	// system roots, for every TLS connection the process makes: OCI registries, the TUF
	// repository, authorization servers and MCP endpoints without their own caBundleRef.
	CABundleFile string

	// read is what Validate read of CABundleFile (TLSClientConfig); copies of the options made
	// after Validate share it.
	read *caBundle
}

// caBundle is the TLS configuration read from the file named file.
type caBundle struct {
	file string
	cfg  *tls.Config
}

// ErrCABundleNotRead is returned by TLSClientConfig when --ca-bundle-file names a file that
// Validate has not read (the options were not validated, or the name changed since).
var ErrCABundleNotRead = errors.New("--ca-bundle-file: not read: validate the options first")

// BindFlags registers --ca-bundle-file on fs.
func (t *TLS) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&t.CABundleFile, "ca-bundle-file", t.CABundleFile, "PEM file of extra CA certificates trusted beside the system roots by every outbound TLS connection: registries, the TUF repository, authorization servers, and MCP endpoints without their own caBundleRef.")
}

// Validate reads and checks --ca-bundle-file, once: TLSClientConfig returns what it read, so the
// wiring that follows does not read the file again.
func (t *TLS) Validate() error {
	t.read = nil
	cfg, err := readCABundle(t.CABundleFile)
	if err != nil {
		return err
	}
	t.read = &caBundle{file: t.CABundleFile, cfg: cfg}
	return nil
}

// TLSClientConfig returns the TLS configuration of every outbound connection: TLS 1.2 at least,
// verification always on, and the system roots plus the certificates of --ca-bundle-file, as
// Validate read them; nil when no bundle file is given (the system roots).
func (t *TLS) TLSClientConfig() (*tls.Config, error) {
	if t.CABundleFile == "" {
		return nil, nil
	}
	if t.read == nil || t.read.file != t.CABundleFile {
		return nil, ErrCABundleNotRead
	}
	return t.read.cfg, nil
}

// readCABundle reads the bundle file (nil config for no file), parsed strictly
// (k8sbinding.ParseCABundle).
func readCABundle(file string) (*tls.Config, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file) //nolint:gosec // an operator-given path
	if err != nil {
		return nil, fmt.Errorf("--ca-bundle-file: %w", err)
	}
	if _, err := k8sbinding.ParseCABundle(data); err != nil {
		return nil, fmt.Errorf("--ca-bundle-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--ca-bundle-file: %w: no certificate", k8sbinding.ErrInvalidCABundle)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
