package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
)

// executionText is the text a model reads of an execution: how it ended,
// its output and its files.
func executionText(e *airlock.Execution) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d", e.ExitCode)
	switch {
	case e.Status == airlock.StatusFailed:
		fmt.Fprintf(&b, " (the service failed to run it: %s)", e.Error)
	case e.TimedOut:
		b.WriteString(" (killed: it ran past its timeout)")
	case e.OOMKilled:
		b.WriteString(" (killed: out of memory)")
	}
	fmt.Fprintf(&b, "; %d ms; execution %s\n", e.DurationMS, e.ID)
	section(&b, "stdout", e.Stdout, e.StdoutTruncated)
	section(&b, "stderr", e.Stderr, e.StderrTruncated)
	if len(e.Artifacts) > 0 {
		b.WriteString("artifacts (files the program wrote):\n")
		for _, a := range e.Artifacts {
			fmt.Fprintf(&b, "  %s (%s, %d bytes)", a.Filename, a.ContentType, a.SizeBytes)
			if a.URL != "" {
				fmt.Fprintf(&b, " %s", a.URL)
			}
			b.WriteString("\n")
		}
		if e.ArtifactsTruncated {
			b.WriteString("  (more files were left out by the artifact limits)\n")
		}
	}
	return b.String()
}

func section(b *strings.Builder, name, text string, truncated bool) {
	if text == "" {
		fmt.Fprintf(b, "%s: (empty)\n", name)
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	if truncated {
		fmt.Fprintf(b, "[%s was cut at the output limit]\n", name)
	}
}

// cellText is the text a model reads of a cell; images is how many of
// its figures follow as image content.
func cellText(r *airlock.CellResult, images int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "context %s (%s); %d ms", r.ContextID, r.ContextState, r.DurationMS)
	if r.TimedOut {
		b.WriteString("; interrupted at its timeout")
	}
	b.WriteString("\n")
	if r.Stdout != "" {
		section(&b, "stdout", r.Stdout, r.StdoutTruncated)
	}
	if r.Stderr != "" {
		section(&b, "stderr", r.Stderr, r.StderrTruncated)
	}
	if r.Value != "" {
		fmt.Fprintf(&b, "--- value ---\n%s\n", r.Value)
	}
	if r.Error != nil {
		fmt.Fprintf(&b, "--- error ---\n%s: %s\n%s", r.Error.Name, r.Error.Value, r.Error.Traceback)
		if !strings.HasSuffix(r.Error.Traceback, "\n") {
			b.WriteString("\n")
		}
	}
	figures := 0
	for _, o := range r.Outputs {
		switch o.Type {
		case "image/png":
			figures++
		case "text/plain":
			fmt.Fprintf(&b, "--- output ---\n%s\n", o.Data)
		}
	}
	if images > 0 {
		fmt.Fprintf(&b, "%d figure(s) follow as images\n", images)
	}
	if figures > images {
		fmt.Fprintf(&b, "%d figure(s) left out (too large or too many)\n", figures-images)
	}
	if r.ContextState == airlock.ContextDead {
		b.WriteString("The interpreter died: run_cell without context_id starts a new one (its variables are gone).\n")
	}
	return b.String()
}

// inlineImage reports whether a MIME type is an image models take.
func inlineImage(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// sniff returns the MIME type of data by its content.
func sniff(data []byte) string {
	mt := http.DetectContentType(data)
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return mt
}

// artifactImages fetches the artifacts that are images (by their bytes,
// whatever their name says) within the result's limits, as image
// content. One that cannot be fetched is left out with a note.
func artifactImages(ctx context.Context, api API, as []airlock.Artifact) []sdk.Content {
	var out []sdk.Content
	total := 0
	for _, a := range as {
		if !inlineImage(a.ContentType) || a.SizeBytes > MaxImageBytes || len(out) >= MaxImagesPerResult ||
			total+int(a.SizeBytes) > MaxImageBytesResult {
			continue
		}
		// The owner's key fetches an artifact at its API path; the URL in
		// the record may name a public address this process cannot reach.
		fetch := a
		fetch.URL = "v1/artifacts/" + url.PathEscape(a.ID)
		var buf bytes.Buffer
		if _, err := api.DownloadArtifact(ctx, fetch, &buf); err != nil {
			out = append(out, &sdk.TextContent{Text: fmt.Sprintf("(could not fetch the image %s: %v)", a.Filename, toolError(err))})
			continue
		}
		mt := sniff(buf.Bytes())
		if !inlineImage(mt) {
			continue
		}
		total += buf.Len()
		out = append(out, &sdk.ImageContent{Data: buf.Bytes(), MIMEType: mt})
	}
	return out
}
