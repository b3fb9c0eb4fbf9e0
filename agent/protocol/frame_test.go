package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// header builds a raw frame header.
func header(t protocol.Type, stream, n uint32) []byte {
	h := make([]byte, protocol.HeaderSize)
	h[0] = byte(t)
	binary.BigEndian.PutUint32(h[1:5], stream)
	binary.BigEndian.PutUint32(h[5:9], n)
	return h
}

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    protocol.Frame
	}{
		{"hello", protocol.Frame{Type: protocol.THello, Payload: []byte(`{"version":1}`)}},
		{"empty payload", protocol.Frame{Type: protocol.TDataEnd, Stream: 7}},
		{"stdin close", protocol.Frame{Type: protocol.TStdinClose, Stream: 1}},
		{"max stream", protocol.Frame{Type: protocol.TStdout, Stream: ^uint32(0), Payload: []byte("x")}},
		{"binary payload", protocol.Frame{Type: protocol.TData, Stream: 3, Payload: []byte{0, 1, 2, 0xff, 0}}},
		{"max payload", protocol.Frame{Type: protocol.TData, Stream: 5, Payload: bytes.Repeat([]byte{0xab}, protocol.MaxPayload)}},
		{"signal", protocol.Frame{Type: protocol.TSignal, Stream: 9, Payload: []byte(`{"signal":15}`)}},
		{"resize", protocol.Frame{Type: protocol.TResize, Stream: 9, Payload: []byte(`{"cols":80,"rows":24}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := protocol.WriteFrame(&buf, tt.f); err != nil {
				t.Fatalf("WriteFrame: %v", err)
			}
			if got, want := buf.Len(), protocol.HeaderSize+len(tt.f.Payload); got != want {
				t.Fatalf("wrote %d bytes, want %d", got, want)
			}
			got, err := protocol.ReadFrame(&buf)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if got.Type != tt.f.Type || got.Stream != tt.f.Stream || !bytes.Equal(got.Payload, tt.f.Payload) {
				t.Fatalf("got %v/%d/%d bytes, want %v/%d/%d bytes", got.Type, got.Stream, len(got.Payload), tt.f.Type, tt.f.Stream, len(tt.f.Payload))
			}
			if buf.Len() != 0 {
				t.Fatalf("%d bytes left unread", buf.Len())
			}
		})
	}
}

func TestFrameSequence(t *testing.T) {
	var buf bytes.Buffer
	in := []protocol.Frame{
		{Type: protocol.TRequest, Stream: 1, Payload: []byte(`{"op":"health"}`)},
		{Type: protocol.TStdout, Stream: 1, Payload: []byte("a")},
		{Type: protocol.TDataEnd, Stream: 3},
		{Type: protocol.TExit, Stream: 1, Payload: []byte(`{"code":0}`)},
	}
	for _, f := range in {
		if err := protocol.WriteFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range in {
		got, err := protocol.ReadFrame(&buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Type != want.Type || got.Stream != want.Stream || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, err := protocol.ReadFrame(&buf); err != io.EOF {
		t.Fatalf("after the last frame: got %v, want io.EOF", err)
	}
}

func TestWriteFrameTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := protocol.WriteFrame(&buf, protocol.Frame{Type: protocol.TData, Stream: 1, Payload: make([]byte, protocol.MaxPayload+1)})
	if !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes of a refused frame", buf.Len())
	}
}

// hugeReader supplies a header announcing n bytes and then zeros, up to 4 GiB.
type hugeReader struct {
	hdr  []byte
	left int64
	read int64
}

func (r *hugeReader) Read(p []byte) (int, error) {
	if len(r.hdr) > 0 {
		n := copy(p, r.hdr)
		r.hdr = r.hdr[n:]
		r.read += int64(n)
		return n, nil
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > r.left {
		n = r.left
	}
	clear(p[:n])
	r.left -= n
	r.read += n
	return int(n), nil
}

func TestReadFrameRefusesHugeLength(t *testing.T) {
	for _, n := range []uint32{protocol.MaxPayload + 1, 1 << 30, ^uint32(0)} {
		r := &hugeReader{hdr: header(protocol.TData, 1, n), left: 4 << 30}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := protocol.ReadFrame(r)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, protocol.ErrFrameTooLarge) {
			t.Fatalf("length %d: got %v, want ErrFrameTooLarge", n, err)
		}
		if r.read != protocol.HeaderSize {
			t.Errorf("length %d: read %d bytes, want only the %d-byte header", n, r.read, protocol.HeaderSize)
		}
		if elapsed > time.Second {
			t.Errorf("length %d: took %v to refuse", n, elapsed)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("length %d: allocated %d bytes before refusing", n, d)
		}
	}
}

func TestReadFrameAcceptsMaxPayload(t *testing.T) {
	r := &hugeReader{hdr: header(protocol.TData, 1, protocol.MaxPayload), left: protocol.MaxPayload}
	f, err := protocol.ReadFrame(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Payload) != protocol.MaxPayload {
		t.Fatalf("payload %d bytes, want %d", len(f.Payload), protocol.MaxPayload)
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"short header", []byte{1, 0, 0}, io.ErrUnexpectedEOF},
		{"header only, payload announced", header(protocol.TData, 1, 10), io.ErrUnexpectedEOF},
		{"truncated payload", append(header(protocol.TData, 1, 10), "12345"...), io.ErrUnexpectedEOF},
		{"type zero", header(0, 1, 0), protocol.ErrBadType},
		{"type after the last type", header(protocol.TResize+1, 1, 0), protocol.ErrBadType},
		{"type 255", header(255, 1, 0), protocol.ErrBadType},
		{"too large", header(protocol.TStdout, 1, protocol.MaxPayload+1), protocol.ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocol.ReadFrame(bytes.NewReader(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTypeString(t *testing.T) {
	for typ := protocol.THello; typ <= protocol.TResize; typ++ {
		if s := typ.String(); s == "" || s[:4] == "type" {
			t.Errorf("type %d has no name: %q", typ, s)
		}
	}
	for _, typ := range []protocol.Type{0, protocol.TResize + 1, 255} {
		if s := typ.String(); s[:4] != "type" {
			t.Errorf("unknown type %d named %q", typ, s)
		}
	}
}

// FuzzReadFrame reads frames from arbitrary bytes: no panic, every frame
// bounded and of a known type, and each one re-encodes to the bytes read.
func FuzzReadFrame(f *testing.F) {
	var ok bytes.Buffer
	protocol.WriteFrame(&ok, protocol.Frame{Type: protocol.THello, Payload: []byte(`{"version":1,"agent":"x","pid":1}`)})
	protocol.WriteFrame(&ok, protocol.Frame{Type: protocol.TStdout, Stream: 1, Payload: []byte("hi\n")})
	protocol.WriteFrame(&ok, protocol.Frame{Type: protocol.TDataEnd, Stream: 3})
	f.Add(ok.Bytes())
	f.Add([]byte{})
	f.Add(header(protocol.TData, 1, ^uint32(0)))
	f.Add(header(0, 0, 0))
	f.Add(append(header(protocol.TData, 1, 4), 1, 2))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			off := len(in) - r.Len()
			fr, err := protocol.ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Payload) > protocol.MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			if fr.Type == 0 || fr.Type > protocol.TResize {
				t.Fatalf("accepted type %d", fr.Type)
			}
			var out bytes.Buffer
			if err := protocol.WriteFrame(&out, fr); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			end := len(in) - r.Len()
			if !bytes.Equal(out.Bytes(), in[off:end]) {
				t.Fatalf("re-encoded frame differs from the bytes read")
			}
		}
	})
}
