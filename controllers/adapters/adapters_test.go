package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
)

func TestClassifyFreezeErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		reason    string
		transient bool
	}{
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), controllers.ReasonServerUnreachable, true},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), controllers.ReasonServerUnreachable, true},
		{"probe timeout", &mcpclient.RefusalError{Name: "probe_timeout", Err: mcpclient.ErrProbeTimeout}, controllers.ReasonServerUnreachable, true},
		{"http status", fmt.Errorf("%w: 503", mcpclient.ErrHTTPStatus), controllers.ReasonServerUnreachable, true},
		{"unresolvable host", &egress.DestinationError{Addr: "mcp.example:443", Reason: "resolve"}, controllers.ReasonServerUnreachable, true},
		{"credential missing", &egress.CredentialError{Ref: egress.CredentialRef{Name: "s", Key: "k"}, Reason: "secret not found"}, controllers.ReasonCredentialNotFound, true},
		{"metadata address", fmt.Errorf("post: %w", &egress.DestinationError{Addr: "169.254.169.254:80", Reason: "metadata"}), controllers.ReasonFreezeRefused, false},
		{"too many tools", &mcpclient.RefusalError{Name: "too_many_tools", Err: mcpclient.ErrTooManyTools}, controllers.ReasonFreezeRefused, false},
		{"roots requested", &mcpclient.FeatureRefusedError{Feature: "roots"}, controllers.ReasonFreezeRefused, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var serr *controllers.StageError
			if !errors.As(classify(tc.err, "https://mcp.example.com/mcp"), &serr) {
				t.Fatal("not a StageError")
			}
			if serr.Reason != tc.reason || serr.Transient != tc.transient || serr.Condition != controllers.TypeSnapshotFrozen {
				t.Fatalf("got %s transient=%v", serr.Reason, serr.Transient)
			}
			if strings.Contains(serr.Message, "127.0.0.1:1") || strings.Contains(serr.Message, "connection refused") {
				t.Fatalf("message carries a raw transport error: %q", serr.Message)
			}
		})
	}
}

func TestClassifyPackErrors(t *testing.T) {
	cases := []struct {
		err       error
		reason    string
		transient bool
	}{
		{&ocipack.RefusalError{Name: "missing_signature", Err: ocipack.ErrNoSignature}, controllers.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "missing_attestation", Err: ocipack.ErrNoAttestation}, controllers.ReasonProvenanceMissing, false},
		{&ocipack.RefusalError{Name: "wrong_source_ref", Err: ocipack.ErrWrongSourceRef}, controllers.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "wrong_identity", Err: ocipack.ErrWrongIdentity}, controllers.ReasonVerificationFailed, false},
		{&ocipack.RefusalError{Name: "blob_digest_mismatch", Err: ocipack.ErrBlobDigestMismatch}, controllers.ReasonPackInvalid, false},
		{&ocipack.RefusalError{Name: "unreviewed_effect", Path: "operations[0].effect", Err: ocipack.ErrUnreviewedEffect}, controllers.ReasonPackInvalid, false},
		{&ocipack.RegistryError{Op: "fetch", Err: errors.New("boom")}, controllers.ReasonRegistryUnavailable, true},
		{errors.New("something else"), controllers.ReasonRegistryUnavailable, true},
	}
	for _, tc := range cases {
		var serr *controllers.StageError
		if !errors.As(classifyPack(tc.err), &serr) || serr.Reason != tc.reason || serr.Transient != tc.transient || serr.Condition != controllers.TypeSourceVerified {
			t.Errorf("%v: got %+v, want %s", tc.err, serr, tc.reason)
		}
	}
}
