package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/b10x/connector-mcp/refusal"
)

// FuzzSSEBody: the SSE tee is transparent (the SDK reads exactly the server's bytes) until an
// event or line exceeds the bound, and then it refuses with frame_too_large (or an event fails the
// strict frame check: invalid_json, duplicate_key, invalid_utf8); its buffers never exceed the
// bound.
func FuzzSSEBody(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), 64)
	f.Add([]byte("data: a\ndata: b\r\n\r\n: comment\n\n"), 8)
	f.Add([]byte("data: "+string(bytes.Repeat([]byte("x"), 100))+"\n\n"), 16)
	f.Fuzz(func(t *testing.T, stream []byte, limit int) {
		if limit <= 0 || limit > 1<<16 {
			return
		}
		reg := &registry{}
		_, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		st := &callState{cancel: cancel}
		b := &sseBody{body: io.NopCloser(iotest.OneByteReader(bytes.NewReader(stream))), reg: reg, st: st, limit: limit}
		var got bytes.Buffer
		buf := make([]byte, 7)
		for {
			n, err := b.Read(buf)
			got.Write(buf[:n])
			if len(b.line) > limit || len(b.data) > limit {
				t.Fatalf("buffers %d/%d over limit %d", len(b.line), len(b.data), limit)
			}
			if errors.Is(err, io.EOF) {
				if !bytes.Equal(got.Bytes(), stream) {
					t.Fatalf("not transparent")
				}
				return
			}
			if err != nil {
				switch refusal.Name(err) {
				case "frame_too_large", "invalid_json", "duplicate_key", "invalid_utf8": // bound, or the strict frame check
				default:
					t.Fatalf("unexpected error %v", err)
				}
				if !bytes.HasPrefix(stream, got.Bytes()) {
					t.Fatalf("passed bytes that the server did not send")
				}
				return
			}
		}
	})
}

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
