package rest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// ArtifactBlobKey is where an artifact's bytes live in the Blobs:
// artifacts/<tenantID>/<executionID>/<artifactID>. It is
// airlock.ArtifactBlobKey, the one key the manager writes under.
func ArtifactBlobKey(a *airlock.Artifact) string { return airlock.ArtifactBlobKey(a) }

// artifactToken is the hex HMAC-SHA256 of
// "artifact|<id>|<tenantID>|<expires>|<keyID>".
func artifactToken(key []byte, artifactID, tenantID string, expires int64, keyID string) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "artifact|%s|%s|%d|%s", artifactID, tenantID, expires, keyID)
	return hex.EncodeToString(mac.Sum(nil))
}

// SignArtifactURL returns a download URL for the tenant's artifact that
// needs no API key until expires (whole seconds), as long as the API key
// it was issued under (keyID) is neither revoked nor expired:
// <base>/v1/artifacts/<id>?expires=<unix>&key=<keyID>&tenant=<tenantID>&token=<hex>,
// where base is "<scheme>://<host>[/<base path>]" and the token is the
// HMAC-SHA256 under key of "artifact|<id>|<tenantID>|<unix>|<keyID>".
func SignArtifactURL(key []byte, base, tenantID, keyID, artifactID string, expires time.Time) string {
	exp := expires.Unix()
	q := url.Values{
		"expires": {strconv.FormatInt(exp, 10)},
		"key":     {keyID},
		"tenant":  {tenantID},
		"token":   {artifactToken(key, artifactID, tenantID, exp, keyID)},
	}
	return strings.TrimSuffix(base, "/") + "/v1/artifacts/" + url.PathEscape(artifactID) + "?" + q.Encode()
}

// ParsePublicURL parses a public base URL (Config.PublicURL): an absolute
// http or https URL with a host, optionally a base path, and no user
// information, query or fragment.
func ParsePublicURL(s string) (*url.URL, error) {
	bad := func(why string) error {
		return airlock.Errorf(airlock.EINVALID, "httpapi: public URL %q %s", s, why)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, bad("does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("must be an absolute http or https URL")
	case u.Opaque != "" || u.Host == "" || strings.HasPrefix(u.Host, ":"):
		return nil, bad("has no host")
	case u.User != nil:
		return nil, bad("must not carry user information")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, bad("must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, bad("must not have a fragment")
	}
	return u, nil
}

// baseURL is the root that artifact URLs are built on: the configured
// public URL, else the scheme and host the client reached us by. The
// scheme is https only if this server terminated TLS; forwarding headers
// are not trusted.
func (s *Server) baseURL(r *http.Request) string {
	if s.publicBase != "" {
		return s.publicBase
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// withArtifactURLs returns a copy of e with a signed URL on every artifact
// and artifacts never null.
func (s *Server) withArtifactURLs(r *http.Request, tenant *airlock.Tenant, e *airlock.Execution) *airlock.Execution {
	out := *e
	out.Artifacts = make([]airlock.Artifact, len(e.Artifacts))
	copy(out.Artifacts, e.Artifacts)
	base := s.baseURL(r)
	expires := s.cfg.Now().Add(s.cfg.ArtifactURLTTL)
	keyID := ""
	if p := PrincipalFrom(r); p != nil {
		keyID = p.Key.ID
	}
	for i := range out.Artifacts {
		if a := &out.Artifacts[i]; a.ID != "" {
			a.URL = SignArtifactURL(s.cfg.SigningKey, base, tenant.ID, keyID, a.ID, expires)
		}
	}
	return &out
}

// tokenResult is what the query of an artifact request proves.
type tokenResult int

const (
	tokenNone    tokenResult = iota // no token sent
	tokenValid                      // signed by us, not expired
	tokenExpired                    // signed by us, expired
	tokenBad                        // anything else
)

// checkToken verifies the signed-URL query of a request for artifact id and
// returns the tenant and the key it was signed for.
func (s *Server) checkToken(q url.Values, id string) (tenantID, keyID string, res tokenResult) {
	if !q.Has("token") && !q.Has("expires") && !q.Has("tenant") && !q.Has("key") {
		return "", "", tokenNone
	}
	tenantID, keyID, token, expStr := q.Get("tenant"), q.Get("key"), q.Get("token"), q.Get("expires")
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || tenantID == "" || keyID == "" || strings.Contains(tenantID, "|") || strings.Contains(id, "|") ||
		strings.Contains(keyID, "|") || len(token) != 2*sha256.Size {
		return "", "", tokenBad
	}
	got, err := hex.DecodeString(token)
	if err != nil {
		return "", "", tokenBad
	}
	want, _ := hex.DecodeString(artifactToken(s.cfg.SigningKey, id, tenantID, exp, keyID))
	if !hmac.Equal(got, want) {
		return "", "", tokenBad
	}
	if s.cfg.Now().Unix() > exp {
		return tenantID, keyID, tokenExpired
	}
	return tenantID, keyID, tokenValid
}

// getArtifact serves an artifact's bytes: GET /v1/artifacts/{id}. A valid
// signed URL or the owning tenant's key authorises it; an expired signed
// URL, or one issued under a key since revoked or expired, is 401;
// anything else is 404, so nobody learns whether another tenant's
// artifact exists.
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tokenTenant, tokenKey, res := s.checkToken(r.URL.Query(), id)
	if res == tokenValid {
		k, err := airlock.KeyByID(r.Context(), s.cfg.Store, tokenKey, s.cfg.Now())
		switch {
		case airlock.ErrorCode(err) == airlock.EUNAUTHORIZED:
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			s.writeProblem(w, r, newProblem(airlock.EUNAUTHORIZED, "artifact-link-revoked", 0,
				"the API key this artifact link was issued under was revoked or has expired"))
			return
		case err != nil:
			s.error(w, r, err)
			return
		case k.TenantID != tokenTenant:
			s.error(w, r, artifactNotFound(id))
			return
		}
	}

	var owner string
	switch t := TenantFrom(r.Context()); {
	case res == tokenValid:
		owner = tokenTenant
	case t != nil:
		owner = t.ID
	case res == tokenExpired:
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
		s.writeProblem(w, r, newProblem(airlock.EUNAUTHORIZED, "artifact-link-expired", 0,
			"this artifact link has expired; fetch the execution again for a fresh one"))
		return
	default:
		s.error(w, r, artifactNotFound(id))
		return
	}
	a, err := s.cfg.Store.Artifact(r.Context(), owner, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		s.error(w, r, artifactNotFound(id))
		return
	} else if err != nil {
		s.error(w, r, err)
		return
	}
	body, _, err := s.cfg.Blobs.Open(r.Context(), ArtifactBlobKey(a))
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		// The index has it but the bytes are gone: worth a warning, but to
		// the client it is simply not there.
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "artifact blob missing",
			slog.String("artifact", a.ID), slog.String("tenant", a.TenantID), slog.String("error", err.Error()))
		s.error(w, r, artifactNotFound(id))
		return
	} else if err != nil {
		s.error(w, r, err)
		return
	}
	defer body.Close()

	h := w.Header()
	h.Set("Content-Type", artifactContentType(a.ContentType))
	h.Set("Content-Disposition", contentDisposition(a.Filename))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "private, no-cache")
	if isHex(a.SHA256) {
		h.Set("ETag", `"`+a.SHA256+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, body)
}

func artifactNotFound(id string) error {
	return airlock.Problem(airlock.ENOTFOUND, "", "artifact %q not found", id)
}

// artifactContentType returns the stored type if it parses, else
// application/octet-stream.
func artifactContentType(ct string) string {
	if ct == "" {
		return "application/octet-stream"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "application/octet-stream"
	}
	if out := mime.FormatMediaType(mt, params); out != "" {
		return out
	}
	return "application/octet-stream"
}

func isHex(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// maxFilenameBytes caps the name offered for download.
const maxFilenameBytes = 200

// contentDisposition returns an attachment disposition for a file name
// written by untrusted code: the base name only, without control
// characters, as a quoted ASCII fallback and an RFC 5987 UTF-8 form.
func contentDisposition(name string) string {
	name = strings.ToValidUTF8(name, "_")
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	for len(name) > maxFilenameBytes {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == ".." || name == "/" {
		name = "artifact"
	}

	var ascii, ext strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 0x80:
			// Each byte of a multi-byte rune becomes one '_' in the
			// fallback; only write one per rune.
			if utf8.RuneStart(c) {
				ascii.WriteByte('_')
			}
		case c == '"' || c == '\\':
			ascii.WriteByte('_')
		default:
			ascii.WriteByte(c)
		}
		if isAttrChar(c) {
			ext.WriteByte(c)
		} else {
			fmt.Fprintf(&ext, "%%%02X", c)
		}
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + ext.String()
}

// isAttrChar reports whether c may appear unescaped in an RFC 5987 value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}
