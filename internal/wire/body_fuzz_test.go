package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// strictFrames refuses a frame the strict scan refuses, by the scan's name, and an overflow as
// frame_too_large; it replaces nothing.
type strictFrames struct{}

func (strictFrames) Frame(raw []byte) ([]byte, error) {
	return nil, snapshot.Validate(bytes.TrimSpace(raw))
}
func (strictFrames) TooLarge(int) error { return errTooLarge }
func (strictFrames) Broken(error)       {}

var errTooLarge = &tooLarge{}

type tooLarge struct{}

func (*tooLarge) Error() string   { return "frame too large" }
func (*tooLarge) Refusal() string { return "frame_too_large" }

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
		b := NewSSEBody(io.NopCloser(iotest.OneByteReader(bytes.NewReader(stream))), limit, strictFrames{})
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
