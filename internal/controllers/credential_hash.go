package controllers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// CredentialHashKeyMinBytes is the minimum length of the operator-held credential hash key.
const CredentialHashKeyMinBytes = 32

// credentialHash is the status fingerprint of a credential value: HMAC-SHA256 under the
// operator-held key over the deployment's UID and the value, so a rotation is noticed, the value
// is never stored, and a reader of status who guesses candidate values cannot confirm a guess
// without the key. Rendered "hmac:<hex>" (HMAC-SHA256, 64 hex digits).
func credentialHash(key []byte, uid string, value []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("connector-mcp credential v2\x00"))
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write(value)
	return "hmac:" + hex.EncodeToString(h.Sum(nil))
}
