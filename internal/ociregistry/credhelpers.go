package ociregistry

import (
	"context"
	"errors"
	"fmt"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// RefusalCredentialHelperFailed is the refusal when a Docker credential helper named by
// credsStore or credHelpers failed, so the request is not sent (never anonymously in its place).
const RefusalCredentialHelperFailed = "credential_helper_failed" //nolint:gosec // G101: a refusal name, not a credential

// ErrCredentialHelper is the reason of RefusalCredentialHelperFailed.
var ErrCredentialHelper = errors.New("docker credential helper failed")

// CredentialsFromDockerConfigFile returns registry credentials from the Docker config file at
// path, whose content is data. A config with only "auths" is read by CredentialsFromDockerConfig.
// A config naming credential helpers ("credsStore", "credHelpers") is read through oras-go's
// Docker credential store, which runs docker-credential-<name> from PATH for the hosts the
// helpers cover and reads "auths" for the others; a failing helper is the named refusal
// credential_helper_failed for that host, never an anonymous request. This is for a local CLI:
// in a cluster there are no helpers and dockerconfigjson Secrets go to CredentialsFromDockerConfig.
func CredentialsFromDockerConfigFile(path string, data []byte) (auth.CredentialFunc, error) {
	plain, err := CredentialsFromDockerConfig(data)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		CredsStore  string            `json:"credsStore"`
		CredHelpers map[string]string `json:"credHelpers"`
	}
	if err := snapshot.Unmarshal(data, &cfg); err != nil {
		return nil, refuse(ocipack.RefusalInvalidDockerConfig, "", ocipack.ErrInvalidDockerConfig)
	}
	if cfg.CredsStore == "" && len(cfg.CredHelpers) == 0 {
		return plain, nil
	}
	store, err := credentials.NewStore(path, credentials.StoreOptions{})
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidDockerConfig, "", fmt.Errorf("%w: %w", ocipack.ErrInvalidDockerConfig, err))
	}
	get := credentials.Credential(store)
	return func(ctx context.Context, hostport string) (auth.Credential, error) {
		c, err := get(ctx, hostport)
		if err != nil {
			return auth.EmptyCredential, refuse(RefusalCredentialHelperFailed, hostport, fmt.Errorf("%w: %w", ErrCredentialHelper, err))
		}
		return c, nil
	}, nil
}
