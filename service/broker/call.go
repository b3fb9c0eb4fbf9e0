package broker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// call is one call from a sandbox through the broker, and the audit event
// it ends in.
type call struct {
	b     *Broker
	w     http.ResponseWriter
	r     *http.Request
	ev    *airlock.EgressEvent
	start time.Time
}

// finish records the call's event with a verdict.
func (k *call) finish(verdict, reason string) {
	k.ev.Verdict, k.ev.Reason = verdict, reason
	k.ev.DurationMS = time.Since(k.start).Milliseconds()
	k.b.cfg.Record(k.ev)
}

// deny answers the sandbox with a problem and records the refusal.
func (k *call) deny(status int, reason, detail string) {
	writeProblem(k.w, status, reason, detail)
	if k.ev.Detail == "" {
		k.ev.Detail = detail
	} else {
		k.ev.Detail += ": " + detail
	}
	k.finish(airlock.VerdictDenied, reason)
}

// authorize finds the scope the call names and checks it against what
// the sandbox holds, what its tenant was granted (at every call: a grant
// taken back stops live sessions' calls at once) and the scope's methods
// and paths. It returns the scope and the path after its name; when ok is
// false the call was denied.
func (k *call) authorize(c airlock.BrokerCaller) (sc *Scope, rest string, ok bool) {
	r := k.r
	scopeName, rest, err := splitCall(r.URL.Path, r.URL.EscapedPath())
	k.ev.Name = clip(scopeName)
	k.ev.Detail = clip(r.Method + " " + r.URL.EscapedPath())
	if err != nil {
		k.deny(http.StatusForbidden, "bad-path", err.Error())
		return nil, "", false
	}
	sc = k.b.scopes[scopeName]
	switch {
	case sc == nil:
		k.deny(http.StatusForbidden, "unknown-scope", fmt.Sprintf("no broker scope %q", scopeName))
		return nil, "", false
	case !slices.Contains(c.Scopes, scopeName):
		k.deny(http.StatusForbidden, "scope-not-held", fmt.Sprintf("this sandbox does not hold broker scope %q", scopeName))
		return nil, "", false
	}
	// The grant; a sandbox of another tenant never gets through.
	if err := k.b.Granted(r.Context(), c.TenantID, scopeName); err != nil {
		if airlock.ErrorCode(err) == airlock.EFORBIDDEN {
			k.deny(http.StatusForbidden, "scope-not-granted", fmt.Sprintf("the tenant was not granted broker scope %q", scopeName))
		} else {
			k.b.cfg.Logger.Error("broker grant check failed", "scope", scopeName, "err", err)
			k.deny(http.StatusServiceUnavailable, "grant-unavailable", "the broker could not check the tenant's grant")
		}
		return nil, "", false
	}
	if !sc.methods[r.Method] {
		k.deny(http.StatusForbidden, "method-not-allowed", fmt.Sprintf("scope %s allows %s, not %s", scopeName, strings.Join(sc.Methods, ", "), r.Method))
		return nil, "", false
	}
	if !slices.ContainsFunc(sc.Paths, func(p string) bool { return matchPath(p, rest) }) {
		k.deny(http.StatusForbidden, "path-not-allowed", fmt.Sprintf("scope %s does not allow %s", scopeName, rest))
		return nil, "", false
	}
	return sc, rest, true
}

// outbound is the request to the scope's upstream: the sandbox's method,
// rest of the path, query, body (counted in sent, at most
// MaxRequestBytes) and headers, less those the sandbox may not send, and
// the credential in the scope's header.
func (k *call) outbound(ctx context.Context, sc *Scope, rest, secret string) (up *http.Request, sent *countReader, err error) {
	r := k.r
	target := *sc.base
	target.Path = sc.base.Path + rest
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	k.ev.Host = sc.base.Host
	k.ev.Port = portOf(sc.base)

	sent = &countReader{r: http.MaxBytesReader(nil, r.Body, k.b.cfg.MaxRequestBytes)}
	var reqBody io.Reader = sent
	if r.ContentLength == 0 && r.Body == http.NoBody {
		reqBody = nil
	}
	up, err = http.NewRequestWithContext(ctx, r.Method, target.String(), reqBody)
	if err != nil {
		return nil, sent, err
	}
	for name, vs := range r.Header {
		ck := http.CanonicalHeaderKey(name)
		if slices.Contains(dropRequest, ck) || ck == sc.Header {
			continue
		}
		up.Header[ck] = vs
	}
	if r.ContentLength > 0 {
		up.ContentLength = r.ContentLength
	}
	up.Header.Set(sc.Header, strings.ReplaceAll(sc.Format, "{credential}", secret))
	return up, sent, nil
}

// answer passes the upstream's answer to the sandbox: its status, its
// headers less those never passed and any that carries the credential,
// and its body (at most MaxResponseBytes) with the credential redacted.
// An encoded body, which could not be searched, is refused.
func (k *call) answer(sc *Scope, resp *http.Response, rd *redactor) {
	// A body the transport did not decode (it asks for gzip and decodes
	// that itself) cannot be searched for the credential.
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		writeProblem(k.w, http.StatusBadGateway, "upstream-encoded", "the upstream's answer is encoded ("+clip(ce)+"); the broker returns only answers it can check for the credential")
		k.ev.Detail += fmt.Sprintf(" -> %d: Content-Encoding %s refused", resp.StatusCode, clip(ce))
		k.finish(airlock.VerdictFailed, "upstream-encoded")
		return
	}
	h := k.w.Header()
	for name, vs := range resp.Header {
		ck := http.CanonicalHeaderKey(name)
		if slices.Contains(dropResponse, ck) || slices.ContainsFunc(sc.StripResponseHeaders, func(s string) bool { return strings.EqualFold(s, ck) }) {
			continue
		}
		// A header that carries the credential, in its name or a value
		// and in any form the redactor knows, is dropped whole.
		if rd.contains(name) || slices.ContainsFunc(vs, rd.contains) {
			continue
		}
		h[ck] = vs
	}
	k.w.WriteHeader(resp.StatusCode)
	n, err := rd.copy(k.w, io.LimitReader(resp.Body, k.b.cfg.MaxResponseBytes+1), k.b.cfg.MaxResponseBytes)
	k.ev.BytesDown = n
	k.ev.Detail += " -> " + strconv.Itoa(resp.StatusCode)
	if err != nil {
		k.ev.Detail += ": " + err.Error()
	}
	k.finish(airlock.VerdictAllowed, "")
}
