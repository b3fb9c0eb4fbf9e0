package seal

import (
	"bufio"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ChunkSize is how much plaintext one sealed chunk holds.
const ChunkSize = 64 << 10

// Stream formats. The header starts with "ALKSEAL" and a version digit.
//
// Version 2 (written): magic, the length and ID of the data key, a
// 32-byte random salt and the chunk size. Each stream is sealed under a
// key of its own, HKDF-SHA256 of the data key with the stream's salt (and
// the key ID and version as info), so nonces only need to differ within
// one stream: the nonce is the chunk's index and the final flag.
//
// Version 1 (read only): magic, the length and ID of the data key, a
// 7-byte random nonce prefix and the chunk size; every stream under the
// data key itself, told apart by the random prefix alone (2^56 values,
// so a tenant's streams risked a repeated nonce after some 2^28 of them).
//
// The header is the additional data of every chunk, with the caller's
// context after it.
const (
	magicBase   = "ALKSEAL"
	magicV1     = magicBase + "1"
	magicV2     = magicBase + "2"
	prefixSize  = 7  // version 1: random per stream; then 4 bytes of chunk index and 1 of final flag
	saltSize    = 32 // version 2: random per stream, the HKDF salt of its key
	tagSize     = 16
	maxKeyIDLen = 64
)

// Version is the stream format NewWriter writes.
const Version = 2

// ErrCorrupt is wrapped by every error for a stream that does not open:
// damaged, cut short, reordered, or sealed for another purpose or key.
var ErrCorrupt = errors.New("seal: the sealed data is damaged, truncated or not what it claims to be")

// ErrWrongKey is wrapped when a stream names a data key other than the
// tenant's.
var ErrWrongKey = fmt.Errorf("%w: it names another data key", ErrCorrupt)

// streamKey derives a version 2 stream's key from the data key and the
// stream's salt.
func streamKey(dek, salt []byte, keyID string) []byte {
	k, err := hkdf.Key(sha256.New, dek, salt, "airlock seal v2 stream\x00"+keyID, KeySize)
	if err != nil {
		panic("seal: hkdf: " + err.Error()) // only for lengths HKDF cannot give
	}
	return k
}

// Writer seals what is written to it into an underlying writer. Close
// writes the final chunk; a stream not closed does not open.
type Writer struct {
	w    io.Writer
	aead interface {
		Seal(dst, nonce, p, ad []byte) []byte
	}
	prefix [prefixSize]byte // zero in version 2
	aad    []byte
	buf    []byte
	out    []byte
	index  uint32
	closed bool
	err    error
}

// NewWriter starts a stream (format Version) sealed under a key derived
// from key (the data key named keyID) into w. aad
// binds the stream to its purpose (a snapshot's tenant and ID, say): the
// same aad must be given to open it.
func NewWriter(w io.Writer, key []byte, keyID string, aad []byte) (*Writer, error) {
	if len(key) != KeySize {
		return nil, errors.New("seal: a data key is 32 bytes")
	}
	if keyID == "" || len(keyID) > maxKeyIDLen {
		return nil, errors.New("seal: key ID must be 1 to 64 bytes")
	}
	var salt [saltSize]byte
	rand.Read(salt[:])
	sw := &Writer{w: w, aead: gcmOf(streamKey(key, salt[:], keyID)), buf: make([]byte, 0, ChunkSize), out: make([]byte, 0, ChunkSize+tagSize)}
	hdr := make([]byte, 0, len(magicV2)+1+len(keyID)+saltSize+4)
	hdr = append(hdr, magicV2...)
	hdr = append(hdr, byte(len(keyID)))
	hdr = append(hdr, keyID...)
	hdr = append(hdr, salt[:]...)
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
	head := make([]byte, len(magicV2)+1)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	h, err := parseHeader(head, func(n int) ([]byte, error) {
		rest := make([]byte, n)
		if _, err := io.ReadFull(br, rest); err != nil {
			return nil, fmt.Errorf("%w: header cut short", ErrCorrupt)
		}
		return rest, nil
	})
	if err != nil {
		return nil, err
	}
	key, err := keys(h.keyID)
	if err != nil {
		return nil, err
	}
	if len(key) != KeySize {
		return nil, errors.New("seal: a data key is 32 bytes")
	}
	sr := &Reader{
		r: br, aad: append(h.raw, aad...), chunk: int(h.chunk),
		in: make([]byte, h.chunk+tagSize), pbuf: make([]byte, 0, h.chunk),
	}
	switch h.version {
	case 1:
		sr.aead, sr.prefix = gcmOf(key), h.nonce
	default:
		sr.aead, sr.prefix = gcmOf(streamKey(key, h.nonce, h.keyID)), make([]byte, prefixSize)
	}
	return sr, nil
}

// header is a parsed stream header.
type header struct {
	version int
	keyID   string
	nonce   []byte // version 1: the nonce prefix; version 2: the salt
	chunk   uint32
	raw     []byte // the header as read, the chunks' additional data
}

// parseHeader parses a stream header from its first bytes (magic and the
// key ID's length) and more, which reads the n bytes that follow.
func parseHeader(head []byte, more func(n int) ([]byte, error)) (*header, error) {
	if len(head) != len(magicV2)+1 || string(head[:len(magicBase)]) != magicBase {
		return nil, fmt.Errorf("%w: not a sealed stream", ErrCorrupt)
	}
	h := &header{}
	nonceSize := 0
	switch string(head[:len(magicV2)]) {
	case magicV1:
		h.version, nonceSize = 1, prefixSize
	case magicV2:
		h.version, nonceSize = 2, saltSize
	default:
		return nil, fmt.Errorf("%w: unknown format version %q", ErrCorrupt, head[len(magicBase)])
	}
	idLen := int(head[len(magicV2)])
	if idLen == 0 || idLen > maxKeyIDLen {
		return nil, fmt.Errorf("%w: bad key ID", ErrCorrupt)
	}
	rest, err := more(idLen + nonceSize + 4)
	if err != nil {
		return nil, err
	}
	if len(rest) != idLen+nonceSize+4 {
		return nil, fmt.Errorf("%w: header cut short", ErrCorrupt)
	}
	h.keyID = string(rest[:idLen])
	h.nonce = rest[idLen : idLen+nonceSize]
	h.chunk = binary.BigEndian.Uint32(rest[idLen+nonceSize:])
	if h.chunk != ChunkSize {
		return nil, fmt.Errorf("%w: unknown chunk size %d", ErrCorrupt, h.chunk)
	}
	h.raw = append(append(make([]byte, 0, len(head)+len(rest)), head...), rest...)
	return h, nil
}

// ParseHeader parses the header at the start of a sealed stream and
// returns its format version and the data key ID it names. It is the
// parser NewReader uses, for tools (and fuzzing) that look at a stream
// without opening it.
func ParseHeader(b []byte) (version int, keyID string, err error) {
	if len(b) < len(magicV2)+1 {
		return 0, "", fmt.Errorf("%w: no header", ErrCorrupt)
	}
	off := len(magicV2) + 1
	h, err := parseHeader(b[:off], func(n int) ([]byte, error) {
		if len(b)-off < n {
			return nil, fmt.Errorf("%w: header cut short", ErrCorrupt)
		}
		return b[off : off+n], nil
	})
	if err != nil {
		return 0, "", err
	}
	return h.version, h.keyID, nil
}

// KeyID reads the data key ID named by a stream's header without opening
// it.
func KeyID(header []byte) (string, bool) {
	if len(header) < len(magicV2)+1 || string(header[:len(magicBase)]) != magicBase {
		return "", false
	}
	if v := string(header[:len(magicV2)]); v != magicV1 && v != magicV2 {
		return "", false
	}
	n := int(header[len(magicV2)])
	if n == 0 || len(header) < len(magicV2)+1+n {
		return "", false
	}
	return string(header[len(magicV2)+1 : len(magicV2)+1+n]), true
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
