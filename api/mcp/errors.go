package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// toolError turns what a tool call failed with into the error the SDK
// sends as a tool error (isError, with the text as content): a problem
// the API answered names its type and status, and says when to retry if
// the server said so, so a model can act on it.
func toolError(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		var b strings.Builder
		msg := ce.Detail
		if msg == "" {
			msg = ce.Title
		}
		b.WriteString(msg)
		slug := client.ProblemSlug(ce.Type)
		if slug == "" {
			slug = strings.ReplaceAll(ce.Code, "_", "-")
		}
		fmt.Fprintf(&b, " (problem %s, HTTP %d", slug, ce.Status)
		if ce.RetryAfter > 0 {
			fmt.Fprintf(&b, "; retry after %d s", int64((ce.RetryAfter+999e6)/1e9))
		}
		b.WriteString(")")
		return errors.New(clean(b.String()))
	}
	var ae *airlock.Error
	switch {
	case errors.Is(err, context.Canceled):
		return errors.New("the call was canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the call took too long and was given up")
	case errors.As(err, &ae):
		msg := ae.Message
		if ae.Type != "" {
			msg += " (problem " + ae.Type + ")"
		}
		return errors.New(clean(msg))
	}
	return errors.New(clean("airlock: " + err.Error()))
}

// clean keeps a message to printable text.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// invalid is a tool error for input the API would refuse as well, found
// before calling it.
func invalid(slug, format string, args ...any) error {
	return airlock.Problem(airlock.EINVALID, slug, format, args...)
}
