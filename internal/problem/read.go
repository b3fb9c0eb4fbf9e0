package problem

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds what a Retry-After header can ask for, so a
// hostile or broken server cannot make a client wait for ever.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (RFC 9110, section 10.2.3). It returns 0 for anything else
// and for a date that has passed, and at most MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// IsJSON reports whether a Content-Type is JSON: a problem or plain.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == ContentType || mt == "application/json")
}

// maxBytes bounds how much of an error response Decode reads.
const maxBytes = 64 << 10

// Decode returns the error an HTTP response stands for: nil for a
// status below 400, else an *airlock.Error mapped from the problem
// document in the body (see AsError) or, if the body is not one, from
// the status alone, with RetryAfter from the Retry-After header. It
// reads at most 64 KiB of the body and does not close it.
func Decode(resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	var p Problem
	ok := false
	if IsJSON(resp.Header.Get("Content-Type")) && resp.Body != nil {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes))
		ok = err == nil && json.Unmarshal(body, &p) == nil && (p.Type != "" || p.Code != "")
	}
	if !ok {
		p = Problem{Status: resp.StatusCode, Detail: fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	e := p.AsError()
	e.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}
