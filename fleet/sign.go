package fleet

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of a forwarded request's signature. Every request one node
// forwards to another carries them; a client's copies are never trusted
// (a request with any of them is checked as a forward, and refused when
// the check fails).
const (
	HeaderSigFrom   = "X-Airlock-Fleet-From"      // the forwarding node
	HeaderSigTime   = "X-Airlock-Fleet-Time"      // Unix seconds
	HeaderSigNonce  = "X-Airlock-Fleet-Nonce"     // 16 random bytes, hex; used once
	HeaderSigBody   = "X-Airlock-Fleet-Body"      // "sha256:<hex>" of the body, or "trailer"
	HeaderSignature = "X-Airlock-Fleet-Signature" // HMAC-SHA256, hex
	// TrailerBodyMAC carries, after a streamed body, the HMAC of its
	// SHA-256 (HeaderSigBody "trailer").
	TrailerBodyMAC = "X-Airlock-Fleet-Body-Mac"
)

// sigHeaders are the headers a forward adds, all removed before the
// request is served.
var sigHeaders = []string{HeaderSigFrom, HeaderSigTime, HeaderSigNonce, HeaderSigBody, HeaderSignature, HeaderReservation}

// signBufferBytes is the largest body a forward hashes before sending it
// (its digest is checked before the receiver serves the request);
// longer bodies stream, and their digest follows in a trailer.
const signBufferBytes = 1 << 20

// Errors of a signature check (logged, never sent to the caller).
var (
	errSigMissing = errors.New("fleet: the forward's signature headers are incomplete")
	errSigTime    = errors.New("fleet: the forward's time is outside the allowed skew")
	errSigBad     = errors.New("fleet: the forward's signature does not match")
	errSigReplay  = errors.New("fleet: the forward's nonce was used before")
	errSigBody    = errors.New("fleet: the forwarded body does not match its signed digest")
)

// signed is what a signature covers, one field a line.
type signed struct {
	method, target, to, from, time, nonce, reservation, body string
}

func (s signed) mac(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, strings.Join([]string{"airlock-fleet-v1", s.method, s.target, s.to, s.from, s.time, s.nonce, s.reservation, s.body}, "\n"))
	return m.Sum(nil)
}

// bodyMAC is the trailer's HMAC of a streamed body's digest.
func bodyMAC(key []byte, nonce string, digest []byte) string {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, "airlock-fleet-body-v1\n"+nonce+"\n")
	m.Write(digest)
	return hex.EncodeToString(m.Sum(nil))
}

// nonces remembers the nonces of accepted forwards for twice MaxSkew,
// so that a captured request cannot be sent again.
type nonces struct {
	mu   sync.Mutex
	seen map[string]time.Time
	last time.Time // last purge
}

// use records nonce, reporting false if it was seen.
func (n *nonces) use(nonce string, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	if now.Sub(n.last) > MaxSkew {
		for k, at := range n.seen {
			if now.Sub(at) > 2*MaxSkew {
				delete(n.seen, k)
			}
		}
		n.last = now
	}
	if _, ok := n.seen[nonce]; ok {
		return false
	}
	n.seen[nonce] = now
	return true
}

// sign prepares r (a forward to node to) and returns the headers to add
// and, for a streamed body, the trailer to declare with the reader that
// fills it. It may replace r.Body with a buffered copy.
func (f *Fleet) sign(r *http.Request, to, reservation string) (http.Header, func(out *http.Request), error) {
	nonceBytes := make([]byte, 16)
	if _, err := rand.Read(nonceBytes); err != nil {
		return nil, nil, err
	}
	s := signed{method: r.Method, target: r.URL.RequestURI(), to: to, from: f.cfg.NodeID,
		time: strconv.FormatInt(time.Now().Unix(), 10), nonce: hex.EncodeToString(nonceBytes), reservation: reservation}
	var stream func(out *http.Request)
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		buf, err := io.ReadAll(io.LimitReader(r.Body, signBufferBytes+1))
		if err != nil {
			return nil, nil, err
		}
		body = buf
		if len(buf) <= signBufferBytes {
			r.Body.Close()
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(buf)), int64(len(buf))
		} else {
			s.body = "trailer"
			rest := r.Body
			r.Body, r.ContentLength = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(buf), rest), rest}, -1
			r.Header.Del("Content-Length")
			key, nonce := []byte(f.cfg.Secret), s.nonce
			stream = func(out *http.Request) {
				out.ContentLength = -1
				out.Trailer = http.Header{TrailerBodyMAC: nil}
				h := &hashReader{r: out.Body, h: sha256.New()}
				h.done = func(d []byte) { out.Trailer.Set(TrailerBodyMAC, bodyMAC(key, nonce, d)) }
				out.Body = h
			}
		}
	}
	if s.body == "" {
		d := sha256.Sum256(body)
		s.body = "sha256:" + hex.EncodeToString(d[:])
	}
	h := http.Header{}
	h.Set(HeaderSigFrom, s.from)
	h.Set(HeaderSigTime, s.time)
	h.Set(HeaderSigNonce, s.nonce)
	h.Set(HeaderSigBody, s.body)
	h.Set(HeaderSignature, hex.EncodeToString(s.mac([]byte(f.cfg.Secret))))
	if reservation != "" {
		h.Set(HeaderReservation, reservation)
	}
	return h, stream, nil
}

// isForward reports whether r claims to be a forward (carries any of the
// signature headers).
func isForward(r *http.Request) bool {
	for _, k := range sigHeaders {
		if _, ok := r.Header[http.CanonicalHeaderKey(k)]; ok {
			return true
		}
	}
	return false
}

// verify checks a forward's signature, time, nonce and body, and
// returns the reservation it names. A buffered body is checked here; a
// streamed one when it ends (its reader then fails instead of ending).
// The signature headers are removed from r.
func (f *Fleet) verify(r *http.Request) (string, error) {
	s := signed{method: r.Method, target: r.URL.RequestURI(), to: f.cfg.NodeID,
		from: r.Header.Get(HeaderSigFrom), time: r.Header.Get(HeaderSigTime), nonce: r.Header.Get(HeaderSigNonce),
		reservation: r.Header.Get(HeaderReservation), body: r.Header.Get(HeaderSigBody)}
	sig := r.Header.Get(HeaderSignature)
	for _, k := range sigHeaders {
		r.Header.Del(k)
	}
	if s.from == "" || s.time == "" || len(s.nonce) != 32 || s.body == "" || sig == "" {
		return "", errSigMissing
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac([]byte(f.cfg.Secret))) {
		return "", errSigBad
	}
	at, err := strconv.ParseInt(s.time, 10, 64)
	now := time.Now()
	if err != nil || now.Sub(time.Unix(at, 0)).Abs() > MaxSkew {
		return "", errSigTime
	}
	if !f.nonces.use(s.nonce, now) {
		return "", errSigReplay
	}
	switch {
	case s.body == "trailer":
		key, nonce := []byte(f.cfg.Secret), s.nonce
		h := &hashReader{r: r.Body, h: sha256.New()}
		h.check = func(d []byte) error {
			if !hmac.Equal([]byte(r.Trailer.Get(TrailerBodyMAC)), []byte(bodyMAC(key, nonce, d))) {
				return errSigBody
			}
			return nil
		}
		r.Body = h
	case strings.HasPrefix(s.body, "sha256:"):
		want, err := hex.DecodeString(strings.TrimPrefix(s.body, "sha256:"))
		if err != nil {
			return "", errSigBody
		}
		var body []byte
		if r.Body != nil {
			body, err = io.ReadAll(io.LimitReader(r.Body, MaxPlacedBodyBytes+1))
			if err != nil {
				return "", err
			}
		}
		d := sha256.Sum256(body)
		if !hmac.Equal(d[:], want) {
			return "", errSigBody
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	default:
		return "", errSigBody
	}
	return s.reservation, nil
}

// hashReader hashes what is read through it; at the end it hands the
// digest to done (the sender's trailer) or check (the receiver's, whose
// error replaces io.EOF).
type hashReader struct {
	r     io.ReadCloser
	h     hash.Hash
	done  func([]byte)
	check func([]byte) error
	ended bool
	err   error
}

func (h *hashReader) Read(p []byte) (int, error) {
	if h.ended {
		return 0, h.err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	if err == io.EOF {
		h.ended, h.err = true, io.EOF
		d := h.h.Sum(nil)
		if h.done != nil {
			h.done(d)
		}
		if h.check != nil {
			if cerr := h.check(d); cerr != nil {
				h.err = cerr
				return n, cerr
			}
		}
	}
	return n, err
}

func (h *hashReader) Close() error { return h.r.Close() }
