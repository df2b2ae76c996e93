package ociregistry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

func profiles(t testing.TB, n int) []*apiv1.ProfileDocument {
	out := make([]*apiv1.ProfileDocument, n)
	for i := range out {
		d := reviewedProfile(t)
		d.Service.Ref = fmt.Sprintf("svc-%d", i)
		out[i] = d
	}
	return out
}

func pushed(t testing.TB, reg *ocitest.Registry, n int) (Reference, *Client) {
	t.Helper()
	c := &Client{PlainHTTP: true}
	repo, err := ParseRepository(reg.Host + "/team/acme")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.Push(context.Background(), repo, profiles(t, n))
	if err != nil {
		t.Fatal(err)
	}
	return ref, c
}

func wantRefusal(t *testing.T, err error, name string, reason error) {
	t.Helper()
	var r *ocipack.RefusalError
	if !errors.As(err, &r) || r.Name != name || !errors.Is(err, reason) {
		t.Fatalf("got %v, want refusal %s", err, name)
	}
}

func TestPushPullRoundTrip(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		t.Run(fmt.Sprintf("referrers=%v", referrers), func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: referrers})
			defer reg.Close()
			ref, c := pushed(t, reg, 2)
			if !strings.HasPrefix(ref.String(), reg.Host+"/team/acme@sha256:") {
				t.Fatalf("reference %s", ref)
			}
			again, _ := pushed(t, reg, 2)
			if again.Digest != ref.Digest {
				t.Fatalf("same profiles must pack to the same digest: %s vs %s", again.Digest, ref.Digest)
			}
			p, err := c.Pull(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Profiles) != 2 || p.Profiles[1].Service.Ref != "svc-1" {
				t.Fatalf("pulled %+v", p.Profiles)
			}
			m, err := ParseManifest(p.Manifest, Limits{})
			if err != nil || m.ArtifactType != ocipack.PackArtifactType || m.Config.MediaType != ocispec.MediaTypeEmptyJSON {
				t.Fatalf("manifest %v %+v", err, m)
			}
		})
	}
}

func TestPullRefusals(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, _ := pushed(t, reg, 3)
	ctx := context.Background()

	t.Run("too many layers", func(t *testing.T) {
		_, err := (&Client{PlainHTTP: true, Limits: Limits{MaxLayers: 2}}).Pull(ctx, ref)
		wantRefusal(t, err, "too_many_layers", ocipack.ErrTooManyLayers)
	})
	t.Run("layer too large", func(t *testing.T) {
		_, err := (&Client{PlainHTTP: true, Limits: Limits{MaxLayerBytes: 100}}).Pull(ctx, ref)
		wantRefusal(t, err, "layer_too_large", ocipack.ErrLayerTooLarge)
	})
	t.Run("pack too large", func(t *testing.T) {
		p, _ := (&Client{PlainHTTP: true}).Pull(ctx, ref)
		_, err := (&Client{PlainHTTP: true, Limits: Limits{MaxTotalBytes: int64(len(p.Layers[0])) * 2}}).Pull(ctx, ref)
		wantRefusal(t, err, "pack_too_large", ocipack.ErrPackTooLarge)
	})
	t.Run("manifest too large", func(t *testing.T) {
		_, err := (&Client{PlainHTTP: true, Limits: Limits{MaxManifestBytes: 200}}).Pull(ctx, ref)
		wantRefusal(t, err, "manifest_too_large", ocipack.ErrManifestTooLarge)
	})
	t.Run("plain http to a remote host", func(t *testing.T) {
		remote := ref
		remote.Registry = "registry.example.com"
		_, err := (&Client{PlainHTTP: true}).Pull(ctx, remote)
		wantRefusal(t, err, "plain_http_not_loopback", ocipack.ErrPlainHTTPNotLoopback)
	})
	t.Run("no digest", func(t *testing.T) {
		noDigest := ref
		noDigest.Digest = ""
		_, err := (&Client{PlainHTTP: true}).Pull(ctx, noDigest)
		wantRefusal(t, err, "digest_required", ocipack.ErrDigestRequired)
	})
}

func TestPullTamperedLayerRefused(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ParseManifest(p.Manifest, Limits{})
	evil := []byte(strings.Replace(string(p.Layers[0]), `"effect":"read"`, `"effect":"rEad"`, 1))
	reg.Tamper(m.Layers[0].Digest.String(), evil)
	_, err = c.Pull(context.Background(), ref)
	wantRefusal(t, err, "blob_digest_mismatch", ocipack.ErrBlobDigestMismatch)
}

func TestPullTamperedManifestRefused(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	p, _ := c.Pull(context.Background(), ref)
	reg.Tamper(ref.Digest, append([]byte(" "), p.Manifest...)[:len(p.Manifest)])
	_, err := c.Pull(context.Background(), ref)
	wantRefusal(t, err, "blob_digest_mismatch", ocipack.ErrBlobDigestMismatch)
}

func TestParseDigestReference(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	good, err := ParseDigestReference("127.0.0.1:5000/team/acme@" + d)
	if err != nil || good.Registry != "127.0.0.1:5000" || good.Repository != "team/acme" || good.Digest != d {
		t.Fatalf("%+v %v", good, err)
	}
	for in, want := range map[string]string{
		"127.0.0.1:5000/team/acme:v1":                                 "digest_required",
		"127.0.0.1:5000/team/acme":                                    "digest_required",
		"127.0.0.1:5000/team/acme:v1@" + d:                            "digest_required",
		"127.0.0.1:5000/team/acme@sha512:" + strings.Repeat("ab", 64): "invalid_reference",
		"127.0.0.1:5000/Team/acme@" + d:                               "invalid_reference",
		"127.0.0.1:5000/team/acme@sha256:abc":                         "invalid_reference",
	} {
		if _, err := ParseDigestReference(in); refusalName(err) != want {
			t.Errorf("%s: got %v, want %s", in, err, want)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for h, want := range map[string]bool{
		"127.0.0.1:5000": true, "localhost:80": true, "[::1]:5000": true, "127.9.9.9": true,
		"10.0.0.1:5000": false, "registry.example.com": false, "localhost.example.com:5000": false,
	} {
		if IsLoopbackHost(h) != want {
			t.Errorf("%s: want %v", h, want)
		}
	}
}

func TestCredentialsFromDockerConfig(t *testing.T) {
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"https://registry.example.com/v1/": map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))},
		"ghcr.io":                          map[string]string{"username": "u", "password": "p"},
	}})
	f, err := CredentialsFromDockerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := f(context.Background(), "registry.example.com")
	if c.Username != "robot" || c.Password != "s3cret" {
		t.Fatalf("got %+v", c)
	}
	c, _ = f(context.Background(), "other.example.com")
	if c.Username != "" || c.Password != "" {
		t.Fatalf("credentials must not leak to another host: %+v", c)
	}
	if _, err := CredentialsFromDockerConfig([]byte(`{"auths":{"x":{"auth":"!!"}}}`)); refusalName(err) != "invalid_docker_config" {
		t.Fatalf("bad auth must be refused, got %v", err)
	}
}

func TestPushPullWithDockerConfigCredentials(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true, Username: "robot", Password: "s3cret-token"})
	defer reg.Close()
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("robot:s3cret-token"))},
	}})
	creds, err := CredentialsFromDockerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo, _ := ParseRepository(reg.Host + "/team/private")
	c := &Client{PlainHTTP: true, Credentials: creds}
	ref, err := c.Push(ctx, repo, profiles(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(ctx, ref); err != nil {
		t.Fatal(err)
	}
	_, err = (&Client{PlainHTTP: true}).Pull(ctx, ref)
	var re *RegistryError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "credentials required") {
		t.Fatalf("anonymous pull must fail for want of credentials, got %v", err)
	}
	wrong, _ := CredentialsFromDockerConfig([]byte(`{"auths":{"` + reg.Host + `":{"username":"robot","password":"guess"}}}`))
	_, err = (&Client{PlainHTTP: true, Credentials: wrong}).Pull(ctx, ref)
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("wrong credentials must fail with 401, got %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "authentication required") {
		t.Fatalf("error carries credentials or registry prose: %v", err)
	}
}

func TestPackProfileSelection(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 2)
	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := p.Profile("svc-1"); err != nil || d.Service.Ref != "svc-1" {
		t.Fatalf("%v %v", d, err)
	}
	_, err = p.Profile("svc-9")
	wantRefusal(t, err, "profile_not_in_pack", ocipack.ErrProfileNotInPack)
	_, err = p.Profile("")
	wantRefusal(t, err, "ambiguous_pack", ocipack.ErrProfileNotInPack)

	twice := profiles(t, 2)
	twice[1].Service.Ref = twice[0].Service.Ref
	repo, _ := ParseRepository(reg.Host + "/team/dup")
	_, err = c.Push(context.Background(), repo, twice)
	wantRefusal(t, err, "duplicate_service", ocipack.ErrInvalidPack)
}
