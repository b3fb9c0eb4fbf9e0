package seal

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ChunkSize is how much plaintext one sealed chunk holds.
const ChunkSize = 64 << 10

const (
	magic       = "ALKSEAL1"
	prefixSize  = 7 // random per stream; then 4 bytes of chunk index and 1 of final flag
	tagSize     = 16
	maxKeyIDLen = 64
)

// ErrCorrupt is wrapped by every error for a stream that does not open:
// damaged, cut short, reordered, or sealed for another purpose or key.
var ErrCorrupt = errors.New("seal: the sealed data is damaged, truncated or not what it claims to be")

// ErrWrongKey is wrapped when a stream names a data key other than the
// tenant's.
var ErrWrongKey = fmt.Errorf("%w: it names another data key", ErrCorrupt)

// The header of a stream: magic, the length and ID of the data key, the
// nonce prefix and the chunk size. It is the additional data of every
// chunk, with the caller's context after it.

// Writer seals what is written to it into an underlying writer. Close
// writes the final chunk; a stream not closed does not open.
type Writer struct {
	w    io.Writer
	aead interface {
		Seal(dst, nonce, p, ad []byte) []byte
	}
	prefix [prefixSize]byte
	aad    []byte
	buf    []byte
	out    []byte
	index  uint32
	closed bool
	err    error
}

// NewWriter starts a stream sealed under key (named keyID) into w. aad
// binds the stream to its purpose (a snapshot's tenant and ID, say): the
// same aad must be given to open it.
func NewWriter(w io.Writer, key []byte, keyID string, aad []byte) (*Writer, error) {
	if len(key) != KeySize {
		return nil, errors.New("seal: a data key is 32 bytes")
	}
	if keyID == "" || len(keyID) > maxKeyIDLen {
		return nil, errors.New("seal: key ID must be 1 to 64 bytes")
	}
	sw := &Writer{w: w, aead: gcmOf(key), buf: make([]byte, 0, ChunkSize), out: make([]byte, 0, ChunkSize+tagSize)}
	rand.Read(sw.prefix[:])
	hdr := make([]byte, 0, len(magic)+1+len(keyID)+prefixSize+4)
	hdr = append(hdr, magic...)
	hdr = append(hdr, byte(len(keyID)))
	hdr = append(hdr, keyID...)
	hdr = append(hdr, sw.prefix[:]...)
	hdr = binary.BigEndian.AppendUint32(hdr, ChunkSize)
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	sw.aad = append(hdr, aad...)
	return sw, nil
}

func nonceFor(prefix []byte, index uint32, final bool) []byte {
	n := make([]byte, 12)
	copy(n, prefix)
	binary.BigEndian.PutUint32(n[prefixSize:], index)
	if final {
		n[11] = 1
	}
	return n
}

// Write seals p in chunks. A full chunk is written only once more data
// follows it, so the last one can be marked final at Close.
func (sw *Writer) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	if sw.closed {
		return 0, errors.New("seal: write after close")
	}
	n := 0
	for len(p) > 0 {
		if len(sw.buf) == ChunkSize {
			if err := sw.flush(false); err != nil {
				return n, err
			}
		}
		k := copy(sw.buf[len(sw.buf):ChunkSize], p)
		sw.buf = sw.buf[:len(sw.buf)+k]
		p = p[k:]
		n += k
	}
	return n, nil
}

func (sw *Writer) flush(final bool) error {
	if sw.index == ^uint32(0) {
		sw.err = errors.New("seal: stream too long")
		return sw.err
	}
	sw.out = sw.aead.Seal(sw.out[:0], nonceFor(sw.prefix[:], sw.index, final), sw.buf, sw.aad)
	sw.index++
	sw.buf = sw.buf[:0]
	if _, err := sw.w.Write(sw.out); err != nil {
		sw.err = err
		return err
	}
	return nil
}

// Close writes the final chunk (empty if the data ended on a chunk
// boundary). It does not close the underlying writer.
func (sw *Writer) Close() error {
	if sw.err != nil {
		return sw.err
	}
	if sw.closed {
		return nil
	}
	sw.closed = true
	return sw.flush(true)
}

// KeyFunc returns the data key a stream names.
type KeyFunc func(keyID string) ([]byte, error)

// Reader opens a sealed stream. Read returns only plaintext that was
// authenticated; a stream that is damaged anywhere, or ends without its
// final chunk, gives an error wrapping ErrCorrupt, never io.EOF.
type Reader struct {
	r    *bufio.Reader
	aead interface {
		Open(dst, nonce, c, ad []byte) ([]byte, error)
	}
	prefix []byte
	aad    []byte
	chunk  int
	in     []byte
	plain  []byte
	pbuf   []byte
	index  uint32
	done   bool
	err    error
}

// NewReader reads a stream's header from r, looks its data key up and
// returns a reader of its plaintext. aad must be what it was sealed with.
func NewReader(r io.Reader, keys KeyFunc, aad []byte) (*Reader, error) {
	br := bufio.NewReaderSize(r, ChunkSize+tagSize+1)
	head := make([]byte, len(magic)+1)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if string(head[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: not a sealed stream", ErrCorrupt)
	}
	idLen := int(head[len(magic)])
	if idLen == 0 || idLen > maxKeyIDLen {
		return nil, fmt.Errorf("%w: bad key ID", ErrCorrupt)
	}
	rest := make([]byte, idLen+prefixSize+4)
	if _, err := io.ReadFull(br, rest); err != nil {
		return nil, fmt.Errorf("%w: header cut short", ErrCorrupt)
	}
	keyID := string(rest[:idLen])
	chunk := binary.BigEndian.Uint32(rest[idLen+prefixSize:])
	if chunk != ChunkSize {
		return nil, fmt.Errorf("%w: unknown chunk size %d", ErrCorrupt, chunk)
	}
	key, err := keys(keyID)
	if err != nil {
		return nil, err
	}
	if len(key) != KeySize {
		return nil, errors.New("seal: a data key is 32 bytes")
	}
	hdr := append(head, rest...)
	return &Reader{
		r: br, aead: gcmOf(key), prefix: rest[idLen : idLen+prefixSize],
		aad: append(hdr, aad...), chunk: int(chunk), in: make([]byte, chunk+tagSize), pbuf: make([]byte, 0, chunk),
	}, nil
}

// KeyID reads the data key ID named by a stream's header without opening
// it.
func KeyID(header []byte) (string, bool) {
	if len(header) < len(magic)+1 || string(header[:len(magic)]) != magic {
		return "", false
	}
	n := int(header[len(magic)])
	if n == 0 || len(header) < len(magic)+1+n {
		return "", false
	}
	return string(header[len(magic)+1 : len(magic)+1+n]), true
}

func (sr *Reader) next() error {
	n, err := io.ReadFull(sr.r, sr.in)
	final := false
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		final = true
	case err != nil:
		return err
	default:
		if _, perr := sr.r.Peek(1); perr == io.EOF {
			final = true
		} else if perr != nil {
			return perr
		}
	}
	if n < tagSize {
		return fmt.Errorf("%w: cut short", ErrCorrupt)
	}
	p, oerr := sr.aead.Open(sr.pbuf[:0], nonceFor(sr.prefix, sr.index, final), sr.in[:n], sr.aad)
	if oerr != nil {
		if final {
			return fmt.Errorf("%w: chunk %d does not authenticate, or the stream ends early", ErrCorrupt, sr.index)
		}
		return fmt.Errorf("%w: chunk %d does not authenticate", ErrCorrupt, sr.index)
	}
	sr.plain, sr.pbuf = p, p[:0]
	sr.index++
	sr.done = final
	return nil
}

// Read returns authenticated plaintext.
func (sr *Reader) Read(p []byte) (int, error) {
	for len(sr.plain) == 0 {
		if sr.err != nil {
			return 0, sr.err
		}
		if sr.done {
			return 0, io.EOF
		}
		if err := sr.next(); err != nil {
			sr.err = err
			return 0, err
		}
	}
	n := copy(p, sr.plain)
	sr.plain = sr.plain[n:]
	return n, nil
}
