package client

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// Server-sent events, as the session endpoints stream them. The stream is
// untrusted input: lines and events are bounded, and events of unknown
// names are skipped.

// MaxEventBytes bounds one event's data (a final event carries a whole
// result, output and figures included).
const MaxEventBytes = MaxJSONBytes

// event is one server-sent event.
type event struct {
	name string
	data []byte
}

// eventReader reads events from a text/event-stream body.
type eventReader struct {
	br  *bufio.Reader
	max int
}

func newEventReader(r io.Reader) *eventReader {
	return &eventReader{br: bufio.NewReaderSize(r, 64<<10), max: MaxEventBytes}
}

var errEventTooLarge = fmt.Errorf("%w: server-sent event too large", ErrBadResponse)

// next returns the next event with data or a name; io.EOF at the end of a
// stream between events, io.ErrUnexpectedEOF in the middle of one.
func (r *eventReader) next() (event, error) {
	var ev event
	var data []byte
	started := false
	for {
		line, err := r.line()
		if err != nil {
			if errors.Is(err, io.EOF) && started {
				return event{}, io.ErrUnexpectedEOF
			}
			return event{}, err
		}
		if len(line) == 0 {
			if !started {
				continue
			}
			ev.data = data
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment (keep-alive)
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
			started = true
		case "data":
			if len(data)+len(value)+1 > r.max {
				return event{}, errEventTooLarge
			}
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
			if data == nil {
				data = []byte{}
			}
			started = true
		}
	}
}

// line reads one line without its end (\n, \r\n or \r\n), bounded.
func (r *eventReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(line)+len(chunk) > r.max+2 {
			return nil, errEventTooLarge
		}
		line = append(line, chunk...)
		if err == nil {
			line = bytes.TrimSuffix(line, []byte("\n"))
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// outputChunk is the data of a stdout or stderr event.
type outputChunk struct {
	Data    string `json:"data"`
	DataB64 string `json:"data_b64"`
}

// decodeChunk returns the bytes of an output event.
func decodeChunk(data []byte) ([]byte, error) {
	var c outputChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: output event: %v", ErrBadResponse, err)
	}
	if c.DataB64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.DataB64)
		if err != nil {
			return nil, fmt.Errorf("%w: output event: %v", ErrBadResponse, err)
		}
		return b, nil
	}
	return []byte(c.Data), nil
}

// problemEvent turns the data of an error event into an *Error.
func problemEvent(data []byte, status int) error {
	var p problem.Problem
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%w: error event: %v", ErrBadResponse, err)
	}
	e := &Error{Status: p.Status, Type: p.Type, Title: p.Title, Detail: p.Detail, Code: p.Code, Extensions: p.Extensions}
	// No header can come after the stream started: the server sends
	// the retry hint as the retry_after member, in seconds.
	if secs, ok := e.Extensions[problem.RetryAfterMember].(float64); ok && secs > 0 {
		e.RetryAfter = min(time.Duration(secs*float64(time.Second)), problem.MaxRetryAfter)
	}
	if e.Status == 0 {
		e.Status = status
	}
	if !airlock.KnownCode(e.Code) {
		e.Code = problem.CodeFor(e.Status)
	}
	return e
}
