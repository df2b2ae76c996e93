package refusal_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/b10x/connector-mcp/refusal"
)

// nameErr is a minimal Named error, as a library would define one.
type nameErr struct{ name string }

func (e *nameErr) Error() string   { return "lib: refused: " + e.name }
func (e *nameErr) Refusal() string { return e.name }

var errReason = errors.New("reason")

func TestName(t *testing.T) {
	leaf := &nameErr{name: "frame_too_large"}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"the refusal itself", leaf, "frame_too_large"},
		{"wrapped with %w", fmt.Errorf("connect: %w", leaf), "frame_too_large"},
		{"in a join", errors.Join(errReason, leaf), "frame_too_large"},
		{"the first in errors.As order", fmt.Errorf("%w; %w", &nameErr{name: "first"}, &nameErr{name: "second"}), "first"},
		// Must-fail twins: no refusal in the tree reads as no name.
		{"nil", nil, ""},
		{"a plain error", errReason, ""},
		{"a refusal's text without its type", errors.New(leaf.Error()), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusal.Name(tc.err); got != tc.want {
				t.Fatalf("Name = %q, want %q", got, tc.want)
			}
			n, ok := refusal.As(tc.err)
			if ok != (tc.want != "") || (ok && n.Refusal() != tc.want) {
				t.Fatalf("As = %v, %v; want a refusal named %q", n, ok, tc.want)
			}
		})
	}
}

func TestHas(t *testing.T) {
	err := fmt.Errorf("pull: %w", &nameErr{name: "digest_required"})
	if !refusal.Has(err, "digest_required") {
		t.Fatal("Has(digest_required) = false for that refusal")
	}
	if refusal.Has(err, "invalid_reference") {
		t.Fatal("Has(invalid_reference) = true for digest_required")
	}
	if refusal.Has(errReason, "") {
		t.Fatal(`Has(err, "") = true for an error with no refusal`)
	}
}

func TestValid(t *testing.T) {
	valid := []string{"tasks", "frame_too_large", "wrong_source_ref", "blob_digest_mismatch", "utf8", "a", strings.Repeat("a", refusal.MaxNameLen)}
	invalid := []string{"", "Frame_too_large", "frame-too-large", "frame too large", "_frame", "frame_", "frame__too",
		"1st", "refused: tasks", "naïve", strings.Repeat("a", refusal.MaxNameLen+1)}
	for _, n := range valid {
		if !refusal.Valid(n) {
			t.Errorf("Valid(%q) = false, want true", n)
		}
	}
	for _, n := range invalid {
		if refusal.Valid(n) {
			t.Errorf("Valid(%q) = true, want false", n)
		}
	}
}

func TestClip(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short stays", "get_forecast", 64, "get_forecast"},
		{"exactly max stays", "abcd", 4, "abcd"},
		{"long ASCII cut at max", "abcdefgh", 4, "abcd..."},
		// "é" is two bytes: cutting at byte 4 would split the second one.
		{"never splits a character", "abcééé", 4, "abc..."},
		{"keeps a character that fits", "abcééé", 5, "abcé..."},
		{"invalid UTF-8 made valid", "a\xffbcdefgh", 4, "a\uFFFDbc..."},
		{"max below one", "abc", 0, "a..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := refusal.Clip(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("Clip(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("Clip(%q, %d) = %q is not valid UTF-8", tc.in, tc.max, got)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short stays", "get_forecast", 64, "get_forecast"},
		{"exactly max stays", "abcd", 4, "abcd"},
		{"long ASCII cut at max, no marker", "abcdefgh", 4, "abcd"},
		{"a split character is dropped", "abcééé", 4, "abc"},
		{"invalid UTF-8 dropped", "a\xffbcdefgh", 4, "abc"},
		{"max below zero", "abc", -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := refusal.Truncate(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("Truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) || len(got) > max(tc.max, 0) {
				t.Fatalf("Truncate(%q, %d) = %q: invalid UTF-8 or over the bound", tc.in, tc.max, got)
			}
		})
	}
}

// FuzzClip: a clipped string is valid UTF-8, never longer than max bytes plus the marker, and a
// prefix of the input whenever the input is valid UTF-8.
func FuzzClip(f *testing.F) {
	f.Add("abcééé", 4)
	f.Add("a\xffbc", 2)
	f.Add(strings.Repeat("界", 40), 64)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max > 1<<16 || max < -1<<16 {
			t.Skip()
		}
		got := refusal.Clip(s, max)
		if !utf8.ValidString(got) && len(s) > max {
			t.Fatalf("Clip(%q, %d) = %q: invalid UTF-8", s, max, got)
		}
		limit := max
		if limit < 1 {
			limit = 1
		}
		body, cut := strings.CutSuffix(got, refusal.Ellipsis)
		if len(s) <= limit {
			if got != s {
				t.Fatalf("Clip(%q, %d) = %q, want the input unchanged", s, max, got)
			}
			return
		}
		if !cut || (utf8.ValidString(s) && (len(body) > limit || !strings.HasPrefix(s, body))) {
			t.Fatalf("Clip(%q, %d) = %q, want a prefix of at most %d bytes and %q", s, max, got, limit, refusal.Ellipsis)
		}
	})
}
