package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// Exec runs a command in a session and returns its result once it ends
// (POST /v1/sessions/{id}/exec). A failing command is a result.
func (c *Client) Exec(ctx context.Context, id string, req airlock.SessionExecRequest) (*airlock.Execution, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var e airlock.Execution
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "exec"), nil, req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ExecStream says where a streamed exec's events go. Nil fields discard.
type ExecStream struct {
	// Started is called once the program runs, with its execution ID and
	// its PID in the sandbox (for SignalExec).
	Started func(executionID string, pid int)
	Stdout  io.Writer
	Stderr  io.Writer
}

// ExecStreaming runs a command in a session and streams its output as it
// comes (Accept: text/event-stream); it returns the result at the end.
func (c *Client) ExecStreaming(ctx context.Context, id string, req airlock.SessionExecRequest, s ExecStream) (*airlock.Execution, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var e airlock.Execution
	err := c.stream(ctx, sessionPath(id, "exec"), req, "exit", &e, func(ev event) error {
		switch ev.name {
		case "start":
			var st struct {
				ExecutionID string `json:"execution_id"`
				PID         int    `json:"pid"`
			}
			if err := json.Unmarshal(ev.data, &st); err != nil {
				return fmt.Errorf("%w: start event: %v", ErrBadResponse, err)
			}
			if s.Started != nil {
				s.Started(st.ExecutionID, st.PID)
			}
		case "stdout", "stderr":
			b, err := decodeChunk(ev.data)
			if err != nil {
				return err
			}
			w := s.Stdout
			if ev.name == "stderr" {
				w = s.Stderr
			}
			if w != nil {
				w.Write(b)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// stream posts in with Accept: text/event-stream and hands every event to
// fn until the final event (decoded into out) or an error event. A server
// that answers with plain JSON instead is accepted too.
func (c *Client) stream(ctx context.Context, path string, in any, final string, out any, fn func(event) error) error {
	body, err := jsonBody(in)
	if err != nil {
		return err
	}
	req, err := c.newRequest(ctx, http.MethodPost, c.endpoint(path, nil), body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream, application/json;q=0.5, application/problem+json;q=0.5")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return problemError(resp)
	}
	what := req.Method + " " + req.URL.Path
	if !isEventStream(resp) {
		return decodeObject(resp, what, out)
	}
	er := newEventReader(resp.Body)
	for {
		ev, err := er.next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("client: %s: %w: the stream ended before its %s event", what, ErrBadResponse, final)
		}
		if err != nil {
			return fmt.Errorf("client: %s: %w", what, err)
		}
		switch ev.name {
		case final:
			if err := json.Unmarshal(ev.data, out); err != nil {
				return fmt.Errorf("client: %s: %w: %s event: %v", what, ErrBadResponse, final, err)
			}
			return nil
		case "error":
			return problemEvent(ev.data, resp.StatusCode)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// SignalExec sends a signal (a name such as "TERM" or "INT", or a number)
// to the process group of a running exec
// (POST /v1/sessions/{id}/exec/{pid}/signal).
func (c *Client) SignalExec(ctx context.Context, id string, pid int, signal string) error {
	if err := needID("session", id); err != nil {
		return err
	}
	var sig any = signal
	if n, err := strconv.Atoi(signal); err == nil {
		sig = n
	}
	_, err := c.call(ctx, http.MethodPost, sessionPath(id, "exec", strconv.Itoa(pid), "signal"), nil, map[string]any{"signal": sig}, nil)
	return err
}
