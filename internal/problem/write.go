package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// Write sends p as the response: its status, the problem media type,
// no caching, no sniffing. An extension that does not encode is left out
// (the rest is sent) and reported as dropped, for the caller's log.
func Write(w http.ResponseWriter, p *Problem) (dropped error) {
	body, err := json.Marshal(p)
	if err != nil && p.Extensions != nil {
		dropped = err
		q := *p
		q.Extensions = nil
		body, err = json.Marshal(q)
	}
	if err != nil { // cannot happen: only strings and an int
		body = []byte(`{"type":"` + TypePrefix + `internal","title":"Internal Server Error","status":500}`)
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
	return dropped
}

// WriteError sends err as a problem (see For), with a Retry-After header
// when err says when to retry. internal reports an error whose text was
// withheld: the caller logs it.
func WriteError(w http.ResponseWriter, err error) (internal bool) {
	p, internal := For(err)
	if d := airlock.RetryAfterOf(err); d > 0 {
		w.Header().Set("Retry-After", RetryAfterSeconds(d))
	}
	Write(w, p)
	return internal
}

// RetryAfterSeconds renders d as the value of a Retry-After header: whole
// seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return strconv.FormatInt(secs, 10)
}
