package ociregistry

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/tuf"
)

// Without an anchor or a repository, the TUF options are public-good Sigstore's: its mirror and
// the root sigstore-go embeds, with no local cache. Twin: a given anchor and repository replace
// both.
func TestTUFOptionsDefault(t *testing.T) {
	o := TUFOptions(nil, "", http.DefaultClient)
	if o.RepositoryBaseURL != PublicGoodTUFURL || !bytes.Equal(o.Root, tuf.DefaultRoot()) || !o.DisableLocalCache || o.Fetcher == nil {
		t.Fatalf("default TUF options: %s, root %d bytes, cache disabled %v", o.RepositoryBaseURL, len(o.Root), o.DisableLocalCache)
	}
	o = TUFOptions([]byte(`{"signed":{}}`), "https://tuf.example", http.DefaultClient)
	if o.RepositoryBaseURL != "https://tuf.example" || string(o.Root) != `{"signed":{}}` {
		t.Fatalf("given TUF options: %s, %s", o.RepositoryBaseURL, o.Root)
	}
}
