package managerapp

import (
	"crypto/rand"
	"fmt"
	"os"

	"github.com/b10x/connector-mcp/internal/controllers"
)

// LoadCredentialHashKey reads the HMAC key of status.credentialHash from path; an empty path
// gives a fresh random key (ephemeral true).
func LoadCredentialHashKey(path string) (key []byte, ephemeral bool, err error) {
	if path == "" {
		key = make([]byte, controllers.CredentialHashKeyMinBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, false, err
		}
		return key, true, nil
	}
	key, err = os.ReadFile(path) //nolint:gosec // an operator-given path
	if err != nil {
		return nil, false, fmt.Errorf("--credential-hash-key-file: %w", err)
	}
	if len(key) < controllers.CredentialHashKeyMinBytes {
		return nil, false, fmt.Errorf("--credential-hash-key-file: the key has %d bytes, at least %d are required", len(key), controllers.CredentialHashKeyMinBytes)
	}
	return key, false, nil
}
