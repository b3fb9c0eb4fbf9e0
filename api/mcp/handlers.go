package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

func (t *tools) runCode(ctx context.Context, api API, req *sdk.CallToolRequest, in airlock.ExecuteRequest) (*sdk.CallToolResult, *airlock.Execution, error) {
	e, err := api.Execute(ctx, in, client.WithAgentID(agentID(req)))
	if err != nil {
		return nil, nil, err
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: executionText(e)}}}
	res.Content = append(res.Content, artifactImages(ctx, api, e.Artifacts)...)
	return res, e, nil
}

func (t *tools) createSession(ctx context.Context, api API, _ *sdk.CallToolRequest, in CreateSessionInput) (*sdk.CallToolResult, *airlock.Session, error) {
	var opts []client.SessionOption
	if in.IdempotencyKey != "" {
		opts = append(opts, client.WithIdempotencyKey(in.IdempotencyKey))
	}
	s, created, err := api.CreateSession(ctx, in.CreateSessionRequest, opts...)
	if err != nil {
		return nil, nil, err
	}
	verb := "created"
	if !created {
		verb = "returned again (same idempotency key)"
	}
	text := fmt.Sprintf("Session %s %s: image %s, size %s, state %s, expires %s.\n"+
		"Pass session_id %q to exec, run_cell, write_file, read_file and list_files; call delete_session when done.",
		s.ID, verb, s.Image, s.Size, s.State, s.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC"), s.ID)
	return textResult(text), s, nil
}

func (t *tools) exec(ctx context.Context, api API, _ *sdk.CallToolRequest, in ExecInput) (*sdk.CallToolResult, *airlock.Execution, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	e, err := api.Exec(ctx, in.SessionID, in.SessionExecRequest)
	if err != nil {
		return nil, nil, err
	}
	return textResult(executionText(e)), e, nil
}

func (t *tools) runCell(ctx context.Context, api API, _ *sdk.CallToolRequest, in RunCellInput) (*sdk.CallToolResult, *airlock.CellResult, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	cid := in.ContextID
	if cid == "" {
		lang := in.Language
		if lang == "" {
			lang = airlock.ContextPython
		}
		cs, err := api.ListContexts(ctx, in.SessionID)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cs {
			if c.Language == lang && c.State != airlock.ContextDead {
				cid = c.ID
				break
			}
		}
		if cid == "" {
			c, err := api.CreateContext(ctx, in.SessionID, lang)
			if err != nil {
				return nil, nil, err
			}
			cid = c.ID
		}
	}
	r, err := api.RunCell(ctx, in.SessionID, cid, in.RunCellRequest)
	if err != nil {
		return nil, nil, err
	}
	// Figures go to the model as images; the structured copy leaves
	// their base64 out rather than send it twice.
	out := *r
	out.Outputs = make([]airlock.CellOutput, len(r.Outputs))
	var images []sdk.Content
	for i, o := range r.Outputs {
		out.Outputs[i] = o
		if o.Type != "image/png" {
			continue
		}
		out.Outputs[i].Data = ""
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil || len(b) > MaxImageBytes || len(images) >= MaxImagesPerResult {
			continue
		}
		images = append(images, &sdk.ImageContent{Data: b, MIMEType: "image/png"})
	}
	res := textResult(cellText(r, len(images)))
	res.Content = append(res.Content, images...)
	return res, &out, nil
}

func (t *tools) writeFile(ctx context.Context, api API, _ *sdk.CallToolRequest, in WriteFileInput) (*sdk.CallToolResult, *airlock.PutFileResult, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	var data []byte
	switch in.Encoding {
	case "", EncodingUTF8:
		data = []byte(in.Content)
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(in.Content))
		if err != nil {
			return nil, nil, invalid("invalid-content", "content is not valid base64: %v", err)
		}
		data = b
	default:
		return nil, nil, invalid("invalid-encoding", "encoding must be %q or %q", EncodingUTF8, EncodingBase64)
	}
	if len(data) > MaxWriteBytes {
		return nil, nil, invalid("content-too-large", "content is %d bytes; write_file takes at most %d (use exec to make larger files)", len(data), MaxWriteBytes)
	}
	r, err := api.PutFile(ctx, in.SessionID, in.Path, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	return textResult(fmt.Sprintf("Wrote %d bytes to %s.", r.Size, r.Path)), r, nil
}

// errReadCap stops a download at read_file's limit.
var errReadCap = errors.New("read limit reached")

// capped keeps the first max bytes written to it, then fails.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) > room {
		c.buf.Write(p[:room])
		c.over = true
		return room, errReadCap
	}
	return c.buf.Write(p)
}

func (t *tools) readFile(ctx context.Context, api API, _ *sdk.CallToolRequest, in ReadFileInput) (*sdk.CallToolResult, *ReadFileOutput, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	limit := in.MaxBytes
	switch {
	case limit == 0:
		limit = DefaultReadBytes
	case limit < 0 || limit > MaxReadBytes:
		return nil, nil, invalid("invalid-max-bytes", "max_bytes must be from 1 to %d", MaxReadBytes)
	}
	w := &capped{max: limit}
	if _, err := api.GetFile(ctx, in.SessionID, in.Path, w); err != nil && !(w.over && errors.Is(err, errReadCap)) {
		return nil, nil, err
	}
	data := w.buf.Bytes()
	out := &ReadFileOutput{Path: in.Path, Bytes: int64(len(data)), Truncated: w.over, MIMEType: sniff(data)}
	res := &sdk.CallToolResult{}
	switch {
	case !w.over && inlineImage(out.MIMEType):
		out.Encoding = "image"
		res.Content = []sdk.Content{
			&sdk.TextContent{Text: fmt.Sprintf("%s: %s, %d bytes (the image follows).", in.Path, out.MIMEType, len(data))},
			&sdk.ImageContent{Data: data, MIMEType: out.MIMEType},
		}
	case validTextPrefix(data, w.over):
		out.Encoding, out.Content = EncodingUTF8, string(trimPartialRune(data, w.over))
		note := ""
		if w.over {
			note = fmt.Sprintf("\n[cut after %d bytes: the file is longer; ask for more with max_bytes]", len(out.Content))
		}
		res.Content = []sdk.Content{&sdk.TextContent{Text: out.Content + note}}
	default:
		out.Encoding, out.Content = EncodingBase64, base64.StdEncoding.EncodeToString(data)
		res.Content = []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s: %d bytes of binary data (%s), base64 in the structured result.", in.Path, len(data), out.MIMEType)}}
	}
	return res, out, nil
}

func (t *tools) listFiles(ctx context.Context, api API, _ *sdk.CallToolRequest, in ListFilesInput) (*sdk.CallToolResult, *airlock.FileList, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	l, err := api.ListFiles(ctx, in.SessionID, in.Path)
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries\n", l.Path, len(l.Entries))
	for _, e := range l.Entries {
		fmt.Fprintf(&b, "%-7s %10d  %s  %s\n", e.Type, e.Size, e.Mode, e.Name)
	}
	if l.Truncated {
		b.WriteString("(the list was cut: the directory has more entries)\n")
	}
	return textResult(b.String()), l, nil
}

func (t *tools) deleteSession(ctx context.Context, api API, _ *sdk.CallToolRequest, in SessionInput) (*sdk.CallToolResult, *airlock.Session, error) {
	if err := needSession(in.SessionID); err != nil {
		return nil, nil, err
	}
	s, err := api.DeleteSession(ctx, in.SessionID)
	if err != nil {
		return nil, nil, err
	}
	return textResult(fmt.Sprintf("Session %s is %s (%s).", s.ID, s.State, s.EndReason)), s, nil
}

func needSession(id string) error {
	if strings.TrimSpace(id) == "" {
		return invalid("missing-session-id", "session_id is required: create_session returns one")
	}
	return nil
}

func textResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// validTextPrefix reports whether data is UTF-8 text (ignoring a
// character cut at the end when the read was cut) without NUL bytes.
func validTextPrefix(data []byte, cut bool) bool {
	return utf8.Valid(trimPartialRune(data, cut)) && bytes.IndexByte(data, 0) < 0
}

// trimPartialRune drops an incomplete character at the end of a cut read.
func trimPartialRune(data []byte, cut bool) []byte {
	if !cut {
		return data
	}
	for k := 1; k <= 3 && k <= len(data); k++ {
		if utf8.RuneStart(data[len(data)-k]) {
			if !utf8.FullRune(data[len(data)-k:]) {
				return data[:len(data)-k]
			}
			break
		}
	}
	return data
}
