package e2b

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
)

// envd's /files: GET reads a file, POST writes files (multipart parts
// named "file" whose filename is the destination, or a raw body with
// ?path=, optionally gzip-encoded). Both stream; neither buffers a whole
// file.

// maxUploadParts bounds the parts of one multipart upload.
const maxUploadParts = 1000

// fileQuery authorizes a /files call and returns the sandbox and the
// mapped ?path= ("" when absent).
func (s *Server) fileQuery(r *http.Request) (*sandboxRef, string, error) {
	q := r.URL.Query()
	if q.Has("signature") && r.Header.Get(headerSandboxID) == "" {
		return nil, "", errorf(http.StatusNotImplemented, "signed file URLs (uploadUrl, downloadUrl) are not supported by Airlock; read and write files through the SDK's files API")
	}
	ref, err := s.authorize(r.Context(), r.Header, purposeEnvd)
	if err != nil {
		return nil, "", err
	}
	if err := checkUser(q.Get("username")); err != nil {
		return nil, "", err
	}
	if !q.Has("path") {
		return ref, "", nil
	}
	p, err := toSandbox(q.Get("path"))
	return ref, p, err
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	ref, p, err := s.fileQuery(r)
	if err == nil && p == "" {
		err = errorf(400, "path is required")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	_, err = s.cfg.Sessions.GetFile(r.Context(), ref.tenant, ref.id, p, func(size int64) io.Writer {
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		h.Set("Cache-Control", "no-store")
		dw.WriteHeader(http.StatusOK)
		return dw
	})
	if err != nil {
		if w.Header().Get("Content-Length") != "" {
			// The body had started: cut the connection so the client
			// sees a short read, never a whole-looking file.
			panic(http.ErrAbortHandler)
		}
		s.writeError(w, r, err)
	}
}

// entryJSON is envd's EntryInfo of a written file.
type entryJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request) {
	ref, p, err := s.fileQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// An upload may take longer than the server's read timeout, but it
	// must keep up a minimum rate (upload.Body sets the read deadline).
	upload.Body(w, r, s.uploadRate)
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []entryJSON
	if mt == "multipart/form-data" {
		out, err = s.writeParts(r, ref, p, params["boundary"])
	} else {
		out, err = s.writeRaw(r, ref, p)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) put(r *http.Request, ref *sandboxRef, p string, size int64, body io.Reader) (entryJSON, error) {
	if p == workspace || p == "/tmp" {
		return entryJSON{}, errorf(400, "the path names a directory")
	}
	if _, err := s.cfg.Sessions.PutFile(r.Context(), ref.tenant, ref.id, p, size, body); err != nil {
		return entryJSON{}, err
	}
	up := fromSandbox(p)
	return entryJSON{Name: path.Base(up), Type: "file", Path: up}, nil
}

func (s *Server) writeRaw(r *http.Request, ref *sandboxRef, p string) ([]entryJSON, error) {
	if p == "" {
		return nil, errorf(400, "path is required for an upload that is not multipart/form-data")
	}
	var body io.Reader = r.Body
	size := r.ContentLength
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if tooSlow(err) {
			return nil, err
		}
		if err != nil {
			return nil, errorf(400, "the body is not gzip: "+clip(err.Error(), 100))
		}
		defer zr.Close()
		body, size = zr, -1 // the disk's limit bounds what it unpacks to
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not supported (gzip is)", clip(enc, 32)))
	}
	e, err := s.put(r, ref, p, size, body)
	if err != nil {
		return nil, err
	}
	return []entryJSON{e}, nil
}

// partFilename is the filename a part's Content-Disposition gives, as
// sent: multipart.Part.FileName keeps only its last element, and E2B's
// SDKs put the whole destination path there.
func partFilename(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

func (s *Server) writeParts(r *http.Request, ref *sandboxRef, p, boundary string) ([]entryJSON, error) {
	if boundary == "" || len(boundary) > 70 {
		return nil, errorf(400, "multipart/form-data without a valid boundary")
	}
	mr := multipart.NewReader(r.Body, boundary)
	var out []entryJSON
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if r.Context().Err() != nil {
				return nil, r.Context().Err()
			}
			if tooSlow(err) {
				return nil, err
			}
			return nil, errorf(400, "malformed multipart body: "+clip(err.Error(), 200))
		}
		if n >= maxUploadParts {
			return nil, errorf(400, fmt.Sprintf("at most %d parts in one upload", maxUploadParts))
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		dest := p
		if dest == "" {
			name := partFilename(part)
			if name == "" {
				return nil, errorf(400, "a file part needs a filename (the destination path) when ?path= is absent")
			}
			if dest, err = toSandbox(name); err != nil {
				return nil, err
			}
		} else if len(out) > 0 {
			return nil, errorf(400, "?path= names one file; send several without it, each part's filename its path")
		}
		e, err := s.put(r, ref, dest, -1, part)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, errorf(400, "the upload has no part named \"file\"")
	}
	return out, nil
}

// tooSlow reports whether err is an upload cut off for its rate.
func tooSlow(err error) bool {
	var ae *airlock.Error
	return errors.As(err, &ae) && ae.Type == upload.ProblemTooSlow
}
