package appoptions

import (
	"errors"

	"github.com/spf13/pflag"
)

// Shared is the cluster trust and egress policy: the part of the configuration that every
// component verifying packs or dialing endpoints (the manager and the gateway) must share, so
// both verify and dial alike.
type Shared struct {
	Verification
	Egress
	TLS
}

// DefaultShared returns the production defaults.
func DefaultShared() Shared {
	return Shared{Egress: DefaultEgress()}
}

// BindFlags registers the trust, egress and TLS flags on fs with s's values as defaults.
func (s *Shared) BindFlags(fs *pflag.FlagSet) {
	s.Verification.BindFlags(fs)
	s.Egress.BindFlags(fs)
	s.TLS.BindFlags(fs)
}

// Validate checks the trust, egress and TLS options and reads the CA bundle (TLS.Validate).
func (s *Shared) Validate() error {
	return errors.Join(s.Verification.Validate(), s.Egress.Validate(), s.TLS.Validate())
}
