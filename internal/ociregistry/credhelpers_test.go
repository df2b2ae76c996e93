package ociregistry

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// writeHelper puts an executable docker-credential-<name> script on PATH and a Docker config
// naming it for host in credHelpers; it returns the config's path and content.
func writeHelper(t *testing.T, name, script, host string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+name), []byte("#!/bin/sh\n"+script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cfg, _ := json.Marshal(map[string]any{"credHelpers": map[string]string{host: name}})
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

func TestPushPullWithDockerCredentialHelper(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true, Username: "robot", Password: "s3cret-token"})
	defer reg.Close()
	path, cfg := writeHelper(t, "mcptest", `[ "$1" = get ] || exit 1
read server
printf '{"ServerURL":"%s","Username":"robot","Secret":"s3cret-token"}' "$server"
`, reg.Host)
	creds, err := CredentialsFromDockerConfigFile(path, cfg)
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
	// The same config read without its helpers would be anonymous, and the registry refuses it.
	plain, err := CredentialsFromDockerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Client{PlainHTTP: true, Credentials: plain}).Pull(ctx, ref); err == nil {
		t.Fatal("an anonymous pull must be refused by the registry")
	}
}

func TestFailingDockerCredentialHelperIsNamedNotAnonymous(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true, Username: "robot", Password: "s3cret-token"})
	defer reg.Close()
	path, cfg := writeHelper(t, "mcpbroken", "echo 'keychain locked' >&2\nexit 1\n", reg.Host)
	creds, err := CredentialsFromDockerConfigFile(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := ParseRepository(reg.Host + "/team/private")
	_, err = (&Client{PlainHTTP: true, Credentials: creds}).Push(context.Background(), repo, profiles(t, 1))
	if refusalName(err) != RefusalCredentialHelperFailed || !errors.Is(err, ErrCredentialHelper) {
		t.Fatalf("a failing helper must be refused as %s, got %v", RefusalCredentialHelperFailed, err)
	}
	if !strings.Contains(err.Error(), reg.Host) {
		t.Fatalf("the refusal must name the registry host: %v", err)
	}
}
