package mcp

import "github.com/airlockhq/airlock"

// Tool inputs. run_code takes airlock.ExecuteRequest, the body of
// POST /v1/execute, as it is; the others wrap the body of their REST call
// with the session (and context) its path names, so their schemas are
// those of the REST API's types.

// CreateSessionInput is create_session's input: the body of
// POST /v1/sessions and its Idempotency-Key header.
type CreateSessionInput struct {
	airlock.CreateSessionRequest
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// SessionInput names a session (delete_session).
type SessionInput struct {
	SessionID string `json:"session_id"`
}

// ExecInput is exec's input: the body of POST /v1/sessions/{id}/exec.
type ExecInput struct {
	SessionID string `json:"session_id"`
	airlock.SessionExecRequest
}

// RunCellInput is run_cell's input: the body of
// POST /v1/sessions/{id}/contexts/{cid}/run, with the context named or
// chosen by language.
type RunCellInput struct {
	SessionID string                  `json:"session_id"`
	ContextID string                  `json:"context_id,omitempty"`
	Language  airlock.ContextLanguage `json:"language,omitempty"`
	airlock.RunCellRequest
}

// WriteFileInput is write_file's input: PUT /v1/sessions/{id}/files with
// the content as text or base64.
type WriteFileInput struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding,omitempty"`
}

// ReadFileInput is read_file's input: GET /v1/sessions/{id}/files.
type ReadFileInput struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	MaxBytes  int    `json:"max_bytes,omitempty"`
}

// ReadFileOutput is what read_file read.
type ReadFileOutput struct {
	Path string `json:"path"`
	// Bytes is how many bytes were read (all of the file unless
	// Truncated).
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated"`
	MIMEType  string `json:"mime_type"`
	// Encoding says what Content holds: "utf-8" (the text), "base64"
	// (binary bytes) or "image" (Content is empty; the image is the
	// result's image content).
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

// ListFilesInput is list_files's input: GET /v1/sessions/{id}/files?list=1.
type ListFilesInput struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path,omitempty"`
}

// Encodings of write_file's content.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
)

// Limits of the file tools and of the images put in results.
const (
	MaxWriteBytes       = 4 << 20 // write_file's content, decoded
	DefaultReadBytes    = 256 << 10
	MaxReadBytes        = 4 << 20
	MaxImageBytes       = 4 << 20 // one image in a result
	MaxImagesPerResult  = 8
	MaxImageBytesResult = 12 << 20 // all images of a result together
)
