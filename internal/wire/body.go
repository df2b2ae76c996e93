package wire

import (
	"bytes"
	"errors"
	"io"
)

// Frames receives what a bounded response body (JSONBody, SSEBody) reads: each complete frame,
// the overflow of the bound, and a body that breaks before its end.
type Frames interface {
	// Frame is handed each complete frame: a whole JSON body, or the joined data lines of one
	// server-sent event. It returns the bytes passed on in the frame's place (nil: the frame as
	// received), or an error that ends the body (Read returns it).
	Frame(raw []byte) ([]byte, error)
	// TooLarge is called once, when a frame or a line exceeds limit bytes; it returns the error
	// Read returns from then on.
	TooLarge(limit int) error
	// Broken is told of a read of the underlying body that failed before its end (not io.EOF).
	Broken(err error)
}

// readBody reads once from body into p and tells f when the body broke.
func readBody(body io.Reader, f Frames, p []byte) (int, error) {
	n, err := body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Broken(err)
	}
	return n, err
}

// ErrorBody bounds a response body that is not a protocol frame (an error page): it is read only
// so the connection can be reused, and ends (io.EOF) after Limit bytes.
type ErrorBody struct {
	// Body is the response body.
	Body io.ReadCloser
	// Limit is the number of bytes read at most.
	Limit int64
	read  int64
}

// Read reads from Body until Limit bytes have been read.
func (b *ErrorBody) Read(p []byte) (int, error) {
	if b.read >= b.Limit {
		return 0, io.EOF
	}
	if int64(len(p)) > b.Limit-b.read {
		p = p[:b.Limit-b.read]
	}
	n, err := b.Body.Read(p)
	b.read += int64(n)
	return n, err
}

// Close closes Body.
func (b *ErrorBody) Close() error { return b.Body.Close() }

// JSONBody bounds an application/json response body to a frame limit and hands the frame to its
// Frames. The body is read whole (within the bound) before its reader gets any of it, as go-sdk
// reads it whole anyway: the reader then reads the frame as received, or what Frame returned in
// its place.
type JSONBody struct {
	body   io.ReadCloser
	frames Frames
	limit  int
	buf    []byte
	out    []byte // what the reader reads, once the body is complete
	done   bool
	err    error // the terminal error, returned once out is drained
}

// NewJSONBody bounds body to limit bytes, reporting to f.
func NewJSONBody(body io.ReadCloser, limit int, f Frames) *JSONBody {
	return &JSONBody{body: body, frames: f, limit: limit}
}

// Read returns the frame (or its replacement) once the whole body has been read, then the
// body's terminal error: io.EOF, the error Frame or TooLarge returned, or the read error of a
// body cut short.
func (b *JSONBody) Read(p []byte) (int, error) {
	if !b.done {
		b.fill()
	}
	if len(b.out) > 0 {
		n := copy(p, b.out)
		b.out = b.out[n:]
		return n, nil
	}
	return 0, b.err
}

// fill reads the whole body within the bound and hands the frame to Frame.
func (b *JSONBody) fill() {
	b.done = true
	for {
		switch {
		case cap(b.buf) == 0:
			b.buf = make([]byte, 0, 4096)
		case len(b.buf) == cap(b.buf):
			b.buf = append(b.buf, 0)[:len(b.buf)]
		}
		n, err := readBody(b.body, b.frames, b.buf[len(b.buf):cap(b.buf)])
		if len(b.buf)+n > b.limit {
			b.err = b.frames.TooLarge(b.limit)
			b.buf = nil
			return
		}
		b.buf = b.buf[:len(b.buf)+n]
		if errors.Is(err, io.EOF) {
			rep, ferr := b.frames.Frame(b.buf)
			if ferr != nil {
				b.err, b.buf = ferr, nil
				return
			}
			b.out, b.err = b.buf, io.EOF
			if rep != nil {
				b.out = rep
			}
			b.buf = nil
			return
		}
		if err != nil {
			// A body cut short: the reader sees the read error, as it would have after the bytes.
			b.err, b.buf = err, nil
			return
		}
	}
}

// Close closes the response body.
func (b *JSONBody) Close() error { return b.body.Close() }

// SSEBody bounds each server-sent event (and each line) of a text/event-stream body to a frame
// limit and hands each event's data to its Frames. The lines of an event are held until the event
// ends, and only then passed on: as received, or with the data lines replaced by what Frame
// returned when every line of the event is a "field: value" line.
type SSEBody struct {
	body   io.ReadCloser
	frames Frames
	limit  int
	line   []byte // the current partial line
	data   []byte // the current event's data, joined
	size   int
	evt    []byte // the current event's complete lines, as received
	meta   []byte // the same lines without the data lines
	plain  bool   // every line of the current event is a "field: value" line
	out    []byte // bytes ready for the reader
	err    error  // a refusal: returned at once
	rerr   error  // the body's terminal error, returned once out is drained
}

// NewSSEBody bounds each event and line of body to limit bytes, reporting to f.
func NewSSEBody(body io.ReadCloser, limit int, f Frames) *SSEBody {
	return &SSEBody{body: body, frames: f, limit: limit}
}

// Read passes on the events that have ended; an unfinished event at the end of the body is
// passed on as received, then the body's terminal error. An error from Frame or TooLarge is
// returned at once.
func (b *SSEBody) Read(p []byte) (int, error) {
	for {
		if b.err != nil {
			return 0, b.err
		}
		if len(b.out) > 0 {
			n := copy(p, b.out)
			b.out = b.out[n:]
			return n, nil
		}
		if b.rerr != nil {
			return 0, b.rerr
		}
		if len(p) == 0 {
			return 0, nil
		}
		// p is the read buffer: process copies what it keeps before p is written.
		n, err := readBody(b.body, b.frames, p)
		b.out = b.out[:0]
		if b.process(p[:n]) {
			continue // b.err is set
		}
		if err != nil {
			// The rest of an unfinished event is passed on as received.
			b.out = append(append(b.out, b.evt...), b.line...)
			b.evt, b.meta, b.line = b.evt[:0], b.meta[:0], b.line[:0]
			b.rerr = err
		}
	}
}

// process parses chunk into lines and events, appending finished events to out. It reports
// whether the stream was refused (b.err).
func (b *SSEBody) process(chunk []byte) bool {
	for rest := chunk; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(b.line)+len(rest) > b.limit {
				return b.overflow()
			}
			b.line = append(b.line, rest...)
			break
		}
		if len(b.line)+i > b.limit {
			return b.overflow()
		}
		b.line = append(b.line, rest[:i+1]...)
		rest = rest[i+1:]
		raw := b.line // the line as received, with its newline
		line := bytes.TrimSuffix(raw[:len(raw)-1], []byte{'\r'})
		if len(line) == 0 {
			if b.endEvent(raw) {
				return true
			}
			b.line = b.line[:0]
			continue
		}
		if len(b.evt) == 0 {
			b.plain = true
		}
		b.evt = append(b.evt, raw...)
		b.line = b.line[:0]
		b.size += len(line)
		if b.size > b.limit {
			return b.overflow()
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, v...)
		} else {
			b.plain = b.plain && bytes.IndexByte(line, ':') >= 0
			b.meta = append(b.meta, raw...)
		}
	}
	return false
}

// endEvent handles the blank line blank that ends an event. It reports whether the stream was
// refused.
func (b *SSEBody) endEvent(blank []byte) bool {
	var rep []byte
	if len(b.data) > 0 {
		var ferr error
		if rep, ferr = b.frames.Frame(b.data); ferr != nil {
			b.err = ferr
			b.out = b.out[:0]
			return true
		}
	}
	if rep != nil && b.plain {
		// The reader reads the event's other fields as received and the replacement as its data.
		b.out = append(b.out, b.meta...)
		b.out = append(b.out, "data: "...)
		b.out = append(b.out, rep...)
		b.out = append(b.out, '\n')
	} else {
		b.out = append(b.out, b.evt...)
	}
	b.out = append(b.out, blank...)
	b.data, b.size = b.data[:0], 0
	b.evt, b.meta = b.evt[:0], b.meta[:0]
	return false
}

func (b *SSEBody) overflow() bool {
	b.err = b.frames.TooLarge(b.limit)
	b.line, b.data, b.evt, b.meta, b.out = nil, nil, nil, nil, nil
	return true
}

// Close closes the response body.
func (b *SSEBody) Close() error { return b.body.Close() }
