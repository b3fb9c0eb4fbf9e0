package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version the agent announces in its Hello.
const Version = 1

// HeaderSize is the size of a frame header on the wire.
const HeaderSize = 9

// MaxPayload bounds one frame's payload. Larger data is split by senders.
const MaxPayload = 256 << 10

// Type says what a frame carries.
type Type uint8

// Frame types. Direction in brackets.
const (
	THello      Type = 1  // [agent->host] JSON Hello, stream 0, first frame
	TRequest    Type = 2  // [host->agent] JSON Request, opens a stream
	TResponse   Type = 3  // [agent->host] JSON Response, ends a stream (or acknowledges an exec)
	TStdin      Type = 4  // [host->agent] raw bytes for a process's stdin
	TStdinClose Type = 5  // [host->agent] closes a process's stdin
	TStdout     Type = 6  // [agent->host] raw bytes a process wrote to stdout
	TStderr     Type = 7  // [agent->host] raw bytes a process wrote to stderr
	TExit       Type = 8  // [agent->host] JSON ExitStatus, ends an exec stream
	TData       Type = 9  // [both] raw file bytes of a put or get
	TDataEnd    Type = 10 // [both] end of file bytes
	TError      Type = 11 // [agent->host] JSON ErrorMessage, ends a stream
	TSignal     Type = 12 // [host->agent] JSON SignalRequest for a running exec
	TWindow     Type = 13 // [both] 4-byte big-endian count of a port stream's bytes consumed; see port.go
	TResize     Type = 14 // [host->agent] JSON ResizeRequest for an exec on a PTY; see pty.go
)

// lastType is the highest frame type ReadFrame accepts.
const lastType = TResize

func (t Type) String() string {
	names := [...]string{"", "hello", "request", "response", "stdin", "stdin-close", "stdout", "stderr", "exit", "data", "data-end", "error", "signal", "window", "resize"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Frame is one unit on the wire.
type Frame struct {
	Type    Type
	Stream  uint32
	Payload []byte
}

// ErrFrameTooLarge is returned for a header announcing more than MaxPayload.
var ErrFrameTooLarge = errors.New("protocol: frame payload too large")

// ErrBadType is returned for a frame of unknown type.
var ErrBadType = errors.New("protocol: unknown frame type")

// WriteFrame writes f to w in one Write call, so concurrent writers that
// serialise calls to WriteFrame never interleave frames.
func WriteFrame(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return ErrFrameTooLarge
	}
	buf := make([]byte, HeaderSize+len(f.Payload))
	buf[0] = byte(f.Type)
	binary.BigEndian.PutUint32(buf[1:5], f.Stream)
	binary.BigEndian.PutUint32(buf[5:9], uint32(len(f.Payload)))
	copy(buf[HeaderSize:], f.Payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame from r. The payload is freshly allocated and
// owned by the caller. The length is checked before anything is allocated.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: Type(h[0]), Stream: binary.BigEndian.Uint32(h[1:5])}
	if f.Type == 0 || f.Type > lastType {
		return Frame{}, fmt.Errorf("%w: %d", ErrBadType, h[0])
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	}
	return f, nil
}
