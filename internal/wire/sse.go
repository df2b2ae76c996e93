package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// ErrMalformedEvent is returned by EventReader.Next for a line that is neither blank nor a
// "field: value" line (go-sdk's client fails its connection on it).
var ErrMalformedEvent = errors.New("malformed event")

// Event is one server-sent event with data, as EventReader reads it.
type Event struct {
	// Name is the event's "event" field, trimmed; empty when it had none.
	Name []byte
	// Data is the event's data lines, each trimmed, joined by newlines. It is reused by the
	// next call of Next.
	Data []byte
}

// EventReader reads the events of a text/event-stream body as go-sdk's client does: an event
// ends at a blank line or at the end of the body, only events with a data line are returned,
// and the last event id and retry delay seen are kept (for resumption with Last-Event-ID).
type EventReader struct {
	r    *bufio.Reader
	name []byte
	data []byte
	// LastID is the last "id" field seen ("" until one is).
	LastID string
	// Retry is the last valid "retry" field seen (0 until one is).
	Retry time.Duration
}

// NewEventReader reads events from body.
func NewEventReader(body io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReader(body)}
}

// Next returns the next event with data. At the end of the body it returns io.EOF (after the
// last event, even one without a closing blank line); a read that fails returns its error, and
// a malformed line ErrMalformedEvent. An event without data is skipped.
func (e *EventReader) Next() (Event, error) {
	e.name, e.data = e.name[:0], e.data[:0]
	hasData := false
	for {
		line, rerr := e.r.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) {
			// A long line: collect it whole (the transport bounds it to the frame limit).
			full := append([]byte(nil), line...)
			for errors.Is(rerr, bufio.ErrBufferFull) {
				line, rerr = e.r.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return Event{}, rerr
		}
		eof := rerr != nil
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if hasData {
				return Event{Name: e.name, Data: e.data}, nil
			}
			e.name = e.name[:0]
			if eof {
				return Event{}, io.EOF
			}
			continue
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if !found {
			return Event{}, ErrMalformedEvent
		}
		switch string(field) {
		case "event":
			e.name = append(e.name[:0], bytes.TrimSpace(value)...)
		case "id":
			e.LastID = string(bytes.TrimSpace(value))
		case "retry":
			if n, perr := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64); perr == nil {
				e.Retry = time.Duration(n) * time.Millisecond
			}
		case "data":
			if hasData {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimSpace(value)...)
			hasData = true
		}
		if eof {
			if hasData {
				return Event{Name: e.name, Data: e.data}, nil
			}
			return Event{}, io.EOF
		}
	}
}
