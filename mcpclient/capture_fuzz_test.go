package mcpclient

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/b10x/connector-mcp/refusal"
)

// FuzzLineLimitReader: stdio lines within the bound pass through unchanged; a longer line is
// refused as frame_too_large and a non-JSON line as invalid_json.
func FuzzLineLimitReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":[2]}\n"), 16)
	f.Add([]byte("not json\n"), 64)
	f.Add([]byte("{\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n"), 8)
	f.Fuzz(func(t *testing.T, stream []byte, limit int) {
		if limit <= 0 || limit > 1<<16 {
			return
		}
		l := &lineLimitReader{r: iotest.HalfReader(bytes.NewReader(stream)), limit: limit, reg: &registry{}}
		got, err := io.ReadAll(l)
		if len(l.line) > limit {
			t.Fatalf("line buffer %d over limit %d", len(l.line), limit)
		}
		if err == nil {
			if !bytes.Equal(got, stream) {
				t.Fatal("not transparent")
			}
			return
		}
		if n := refusal.Name(err); n != "frame_too_large" && n != "invalid_json" {
			t.Fatalf("unexpected error %v", err)
		}
		if !bytes.HasPrefix(stream, got) {
			t.Fatal("passed bytes that the server did not send")
		}
	})
}
