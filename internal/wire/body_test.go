package wire

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// recFrames records what a bounded body reports and replaces every frame with rep.
type recFrames struct {
	frames []string
	rep    []byte
	broken error
	limit  int
}

func (f *recFrames) Frame(raw []byte) ([]byte, error) {
	f.frames = append(f.frames, string(raw))
	return f.rep, nil
}
func (f *recFrames) TooLarge(limit int) error { f.limit = limit; return errTooLarge }
func (f *recFrames) Broken(err error)         { f.broken = err }

// A JSON body is handed to Frame whole and read as its replacement; read as received when Frame
// replaces nothing.
func TestJSONBodyFrame(t *testing.T) {
	f := &recFrames{rep: []byte(`{}`)}
	out, err := io.ReadAll(NewJSONBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(`{"a":[1]}`))), 64, f))
	if err != nil || string(out) != `{}` || len(f.frames) != 1 || f.frames[0] != `{"a":[1]}` {
		t.Fatalf("read %q, %v; frames %q", out, err, f.frames)
	}
	f = &recFrames{}
	out, err = io.ReadAll(NewJSONBody(io.NopCloser(strings.NewReader(`{"a":[1]}`)), 64, f))
	if err != nil || string(out) != `{"a":[1]}` {
		t.Fatalf("read %q, %v", out, err)
	}
}

// Must-fail twins: a body over the bound ends in TooLarge's error with nothing read and no
// frame handed over; a body cut short is Broken and ends in its read error.
func TestJSONBodyRefusals(t *testing.T) {
	f := &recFrames{}
	out, err := io.ReadAll(NewJSONBody(io.NopCloser(strings.NewReader(strings.Repeat("x", 65))), 64, f))
	if !errors.Is(err, errTooLarge) || len(out) != 0 || f.limit != 64 || len(f.frames) != 0 {
		t.Fatalf("over the bound: %q, %v, %+v", out, err, f)
	}
	f = &recFrames{}
	cut := io.NopCloser(iotest.TimeoutReader(strings.NewReader(`{"a"`)))
	_, err = io.ReadAll(NewJSONBody(cut, 64, f))
	if !errors.Is(err, iotest.ErrTimeout) || !errors.Is(f.broken, iotest.ErrTimeout) || len(f.frames) != 0 {
		t.Fatalf("cut short: %v, broken %v, frames %q", err, f.broken, f.frames)
	}
}

// An SSE event whose lines are all "field: value" lines has its data replaced; one with another
// line is passed on as received; an event over the bound is refused.
func TestSSEBodyEvents(t *testing.T) {
	f := &recFrames{rep: []byte(`{}`)}
	stream := "id: 1\ndata: {\"a\":\ndata: 1}\n\nbogus\ndata: 2\n\n"
	out, err := io.ReadAll(NewSSEBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), 64, f))
	want := "id: 1\ndata: {}\n\nbogus\ndata: 2\n\n"
	if err != nil || string(out) != want || len(f.frames) != 2 || f.frames[0] != "{\"a\":\n1}" {
		t.Fatalf("read %q, %v; frames %q", out, err, f.frames)
	}
	f = &recFrames{}
	_, err = io.ReadAll(NewSSEBody(io.NopCloser(strings.NewReader("data: "+strings.Repeat("x", 64)+"\n\n")), 32, f))
	if !errors.Is(err, errTooLarge) || f.limit != 32 {
		t.Fatalf("over the bound: %v", err)
	}
}

// An error page is read up to its bound and no further.
func TestErrorBodyBound(t *testing.T) {
	out, err := io.ReadAll(&ErrorBody{Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), Limit: 10})
	if err != nil || len(out) != 10 {
		t.Fatalf("read %d bytes, %v", len(out), err)
	}
}
