package wire

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// Events with data are returned (names and data trimmed, data lines joined), events without data
// skipped, the last id and retry kept, and the last event returned without its blank line.
func TestEventReader(t *testing.T) {
	stream := ": hello\n\nevent: message\r\nid: 7\nretry: 250\ndata: {\"a\":\ndata:  1}\n\nid: 8\n\ndata: last"
	r := NewEventReader(iotest.OneByteReader(strings.NewReader(stream)))
	ev, err := r.Next()
	if err != nil || string(ev.Name) != "message" || string(ev.Data) != "{\"a\":\n1}" || r.LastID != "7" || r.Retry != 250*time.Millisecond {
		t.Fatalf("first: %q %q %v, id %q retry %v", ev.Name, ev.Data, err, r.LastID, r.Retry)
	}
	ev, err = r.Next()
	if err != nil || len(ev.Name) != 0 || string(ev.Data) != "last" || r.LastID != "8" {
		t.Fatalf("second: %q %q %v, id %q", ev.Name, ev.Data, err, r.LastID)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
}

// Must-fail twins: a line without a colon is ErrMalformedEvent; a read that fails is its error,
// not the end of the stream.
func TestEventReaderRefusals(t *testing.T) {
	if _, err := NewEventReader(strings.NewReader("data: 1\nbogus\n\n")).Next(); !errors.Is(err, ErrMalformedEvent) {
		t.Fatalf("malformed: %v", err)
	}
	if _, err := NewEventReader(iotest.TimeoutReader(strings.NewReader("data: 1\n"))).Next(); !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("read error: %v", err)
	}
}
