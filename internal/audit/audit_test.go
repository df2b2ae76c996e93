package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestRecordSchema: a record is one JSON line with exactly the documented fields of version 1,
// empty ones left out, v and time set.
func TestRecordSchema(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	l.now = func() time.Time { return time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC) }
	if err := l.Write(Record{Kind: KindActivation, Object: "ServiceDeployment", Namespace: "team-a", Name: "weather", Generation: 3,
		SnapshotDigest: "sha256:aa", Outcome: "Activated", DurationSeconds: Seconds(1500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(Record{Kind: KindCall, Outcome: "not_active", Refusal: "not_active"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"durationSeconds", "generation", "kind", "name", "namespace", "object", "outcome", "snapshotDigest", "time", "v"}
	if !reflect.DeepEqual(keys, want) || m["v"] != float64(1) || m["time"] != "2026-12-06T12:00:00Z" || m["durationSeconds"] != 1.5 {
		t.Errorf("record %s: keys %v", lines[0], keys)
	}
}

// TestDocumentedFields: docs/observability.md's audit table lists every field of Record, and
// nothing else.
func TestDocumentedFields(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## Audit")
	if !ok {
		t.Fatal("docs/observability.md has no Audit section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var documented []string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, f := range strings.Split(cell, ",") {
			documented = append(documented, strings.Trim(strings.TrimSpace(f), "`"))
		}
	}
	var fields []string
	rt := reflect.TypeOf(Record{})
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	sort.Strings(documented)
	sort.Strings(fields)
	if !reflect.DeepEqual(documented, fields) {
		t.Errorf("documented audit fields %v, Record has %v", documented, fields)
	}
}

// TestOpen: the sinks by value; an unknown one is refused by name; a file sink appends lines.
func TestOpen(t *testing.T) {
	for _, s := range []string{"", "stdout", "stderr"} {
		if l, err := Open(s); err != nil || l == nil {
			t.Errorf("Open(%q) = %v, %v", s, l, err)
		}
	}
	if l, err := Open("none"); err != nil || l != nil {
		t.Errorf("Open(none) = %v, %v; want no logger", l, err)
	}
	for _, s := range []string{"syslog", "file:", "https://audit.example.com"} {
		if _, err := Open(s); !errors.Is(err, ErrInvalidSink) {
			t.Errorf("Open(%q) = %v, want ErrInvalidSink", s, err)
		}
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	for range 2 {
		l, err := Open("file:" + path)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Write(Record{Kind: KindCall, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if n := strings.Count(string(b), "\n"); n != 2 || fi.Mode().Perm() != 0o600 {
		t.Errorf("file sink: %d lines, mode %v", n, fi.Mode().Perm())
	}
	var nilLogger *Logger
	if err := nilLogger.Write(Record{}); err != nil {
		t.Error(err)
	}
}
