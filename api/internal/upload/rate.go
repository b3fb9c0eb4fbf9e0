package upload

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of Rate.
const (
	DefaultMinBytesPerSec = 8 << 10
	DefaultWindow         = 30 * time.Second
)

// ProblemTooSlow is the problem type of an upload cut off for its rate.
const ProblemTooSlow = "upload-too-slow"

// Rate is the least an upload must keep up: MinBytesPerSec on average
// over every Window (so MinBytesPerSec x Window bytes per window).
type Rate struct {
	MinBytesPerSec int64
	Window         time.Duration
}

// Validate fills defaults (DefaultMinBytesPerSec, DefaultWindow) and
// checks the rate.
func (r *Rate) Validate() error {
	if r.MinBytesPerSec < 0 || r.Window < 0 {
		return errors.New("upload: the minimum rate and its window must not be negative")
	}
	if r.MinBytesPerSec == 0 {
		r.MinBytesPerSec = DefaultMinBytesPerSec
	}
	if r.Window == 0 {
		r.Window = DefaultWindow
	}
	if r.Window < 10*time.Millisecond {
		return errors.New("upload: the window of the minimum rate must be at least 10ms")
	}
	return nil
}

// perWindow is how many bytes each window must bring.
func (r Rate) perWindow() int64 {
	return max(1, r.MinBytesPerSec*int64(r.Window)/int64(time.Second))
}

// TooSlow is the error of an upload cut off for its rate.
func (r Rate) TooSlow() *airlock.Error {
	return airlock.Problem(airlock.EINVALID, ProblemTooSlow,
		"the upload was cut off: it sent fewer than %d bytes in %s (the minimum is %d bytes/s); nothing was written", r.perWindow(), r.Window, r.MinBytesPerSec)
}

// Body replaces req.Body with one that must keep up rate, using the
// connection's read deadline (which it sets, replacing the server's read
// timeout for this request): each window of rate.Window must bring
// rate.MinBytesPerSec x Window bytes, or the read that waits fails with
// an error wrapping the problem upload-too-slow (400). rate must have
// been validated.
func Body(w http.ResponseWriter, req *http.Request, rate Rate) {
	b := &body{ReadCloser: req.Body, rc: http.NewResponseController(w), rate: rate, need: rate.perWindow()}
	b.next(time.Now())
	req.Body = b
}

type body struct {
	io.ReadCloser
	rc   *http.ResponseController
	rate Rate
	need int64 // bytes still due in this window
	err  error
}

// next starts a window at now.
func (b *body) next(now time.Time) {
	b.need = b.rate.perWindow()
	b.rc.SetReadDeadline(now.Add(b.rate.Window))
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	b.need -= int64(n)
	if b.need <= 0 {
		b.next(time.Now())
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		b.err = b.rate.TooSlow()
		return n, b.err
	}
	return n, err
}

// Close clears the deadline it set, so it does not outlive the body.
func (b *body) Close() error {
	b.rc.SetReadDeadline(time.Time{})
	return b.ReadCloser.Close()
}
