package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// The code interpreter (port 49999): /execute streams a cell's output as
// JSON lines, /contexts manages contexts, on the session's code
// contexts. A sandbox has a default Python and JavaScript context, made
// on first use.

// maxExecuteBody bounds an /execute body: the code and a little more.
const maxExecuteBody = airlock.MaxCodeBytes + 64<<10

// interpreterLanguage maps E2B's language names to a context language.
func interpreterLanguage(l string) (airlock.ContextLanguage, string, error) {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "", "python", "python3", "py":
		return airlock.ContextPython, "python", nil
	case "javascript", "js", "node", "nodejs":
		return airlock.ContextNode, "javascript", nil
	}
	return "", "", errorf(400, fmt.Sprintf("language %q is not supported by Airlock's code contexts (python, javascript)", clip(l, 32)))
}

func e2bLanguage(l airlock.ContextLanguage) string {
	if l == airlock.ContextNode {
		return "javascript"
	}
	return string(l)
}

// serveInterpreter routes the code interpreter's calls. /execute runs
// code, so it takes the envd access token (X-Access-Token, which the SDKs
// send on /execute) and nothing else; the traffic token, meant for
// reaching the sandbox's servers and more widely handed out, opens the
// other calls (health, the contexts), which the SDKs send with it alone.
func (s *Server) serveInterpreter(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" && r.Method == http.MethodGet {
		s.health(w, r, purposeTraffic, purposeEnvd)
		return
	}
	purposes := []string{purposeTraffic, purposeEnvd}
	if r.URL.Path == "/execute" {
		purposes = []string{purposeEnvd}
	}
	ref, err := s.authorize(r.Context(), r.Header, purposes...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.URL.Path == "/execute" && r.Method == http.MethodPost:
		err = s.execute(w, r, ref)
	case r.URL.Path == "/contexts" && r.Method == http.MethodPost:
		err = s.createContext(w, r, ref)
	case r.URL.Path == "/contexts" && r.Method == http.MethodGet:
		err = s.listContexts(w, r, ref)
	case len(seg) == 2 && seg[0] == "contexts" && r.Method == http.MethodDelete:
		err = s.deleteContext(w, r, ref, seg[1])
	case len(seg) == 3 && seg[0] == "contexts" && seg[2] == "restart" && r.Method == http.MethodPost:
		err = s.restartContext(w, r, ref, seg[1])
	case r.URL.Path == "/execute" || r.URL.Path == "/contexts" || len(seg) <= 3 && seg[0] == "contexts":
		err = errorf(http.StatusMethodNotAllowed, r.Method+" "+clip(r.URL.Path, 100)+" is not a call of the code interpreter")
	default:
		err = errorf(http.StatusNotFound, "no such code interpreter path: "+clip(r.URL.Path, 100))
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

// decodeInterpreterBody reads a JSON body leniently (Python's SDK sends
// nulls) within max bytes.
func decodeInterpreterBody(r *http.Request, max int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return errorf(400, "could not read the request body")
	}
	if int64(len(b)) > max {
		return errorf(413, fmt.Sprintf("the request body is larger than %d bytes", max))
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(400, "the request body is not valid JSON for this call: "+clip(err.Error(), 200))
	}
	return nil
}

// executeRequest is the body of POST /execute.
type executeRequest struct {
	Code      *string           `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (req *executeRequest) validate() error {
	switch {
	case req.Code == nil:
		return errorf(400, "code is required")
	case len(*req.Code) > airlock.MaxCodeBytes:
		return errorf(413, fmt.Sprintf("code is %d bytes; the limit is %d", len(*req.Code), airlock.MaxCodeBytes))
	case req.ContextID != "" && req.Language != "":
		return errorf(400, "give context_id or language, not both")
	case len(req.ContextID) > 64:
		return errorf(400, "bad context_id")
	case len(req.EnvVars) > 0:
		return errorf(400, "env_vars are not supported by Airlock's code contexts: set them in the code (os.environ, process.env)")
	}
	return nil
}

// ctxLock serialises the making of a sandbox's default contexts.
func (s *Server) ctxLock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ctxLocks[id]
	if l == nil {
		l = &sync.Mutex{}
		s.ctxLocks[id] = l
	}
	return l
}

// defaultContext returns the sandbox's default context of a language,
// making it (and recording it) if there is none, or if stale names one
// that is gone.
func (s *Server) defaultContext(ctx context.Context, ref *sandboxRef, lang airlock.ContextLanguage, name, stale string) (string, error) {
	l := s.ctxLock(ref.id)
	l.Lock()
	defer l.Unlock()
	ref.mu.Lock()
	cid := ref.rec.Contexts[name]
	ref.mu.Unlock()
	if cid != "" && cid != stale {
		return cid, nil
	}
	c, err := s.cfg.Sessions.CreateContext(ctx, ref.tenant, ref.id, airlock.CreateContextRequest{Language: lang})
	if err != nil {
		return "", err
	}
	ref.mu.Lock()
	rec := *ref.rec
	rec.Contexts = maps.Clone(rec.Contexts)
	if rec.Contexts == nil {
		rec.Contexts = map[string]string{}
	}
	rec.Contexts[name] = c.ID
	ref.rec = &rec
	ref.mu.Unlock()
	if err := s.cfg.Store.PutE2BSandbox(context.WithoutCancel(ctx), &rec); err != nil {
		s.log.Warn("e2b: record a default context", "sandbox", ref.id, "err", err)
	}
	return c.ID, nil
}

// cellObserver streams a cell's output as stdout and stderr lines, line
// buffered as a notebook kernel's streams are: complete lines go out as
// they come (all that one chunk completes, in one line of the stream),
// the rest of a line when the next chunk ends it, after partialDelay, or
// at the end of the cell.
type cellObserver struct {
	out      *ndjson
	now      func() time.Time
	mu       sync.Mutex
	streams  [2]lineBuffer // stdout, stderr
	sawStart bool
}

const partialDelay = 100 * time.Millisecond

type lineBuffer struct {
	t       textStream
	pending string
	timer   *time.Timer
}

func (o *cellObserver) Started(string)  { o.sawStart = true }
func (o *cellObserver) Stdout(b []byte) { o.add(0, b) }
func (o *cellObserver) Stderr(b []byte) { o.add(1, b) }

var streamNames = [2]string{"stdout", "stderr"}

func (o *cellObserver) add(i int, b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lb := &o.streams[i]
	lb.pending += lb.t.text(b)
	if k := strings.LastIndexByte(lb.pending, '\n'); k >= 0 {
		o.line(i, lb.pending[:k+1])
		lb.pending = lb.pending[k+1:]
	}
	if lb.pending != "" && lb.timer == nil {
		lb.timer = time.AfterFunc(partialDelay, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			lb.timer = nil
			o.line(i, lb.pending)
			lb.pending = ""
		})
	}
}

// line sends text of a stream (o.mu held).
func (o *cellObserver) line(i int, text string) {
	if text == "" {
		return
	}
	o.out.send(map[string]any{"type": streamNames[i], "text": text, "timestamp": o.now().UTC().Format(time.RFC3339Nano)})
}

// flush sends what is held back, at the end of the cell.
func (o *cellObserver) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.streams {
		lb := &o.streams[i]
		if lb.timer != nil {
			lb.timer.Stop()
			lb.timer = nil
		}
		o.line(i, lb.pending+lb.t.flush())
		lb.pending = ""
	}
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, ref *sandboxRef) error {
	var req executeRequest
	if err := decodeInterpreterBody(r, maxExecuteBody, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cid, name, lang := req.ContextID, "", airlock.ContextLanguage("")
	var err error
	if cid == "" {
		if lang, name, err = interpreterLanguage(req.Language); err != nil {
			return err
		}
		if cid, err = s.defaultContext(ctx, ref, lang, name, ""); err != nil {
			return err
		}
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{}) // a cell may run long; writes have their own deadline
	out := newNDJSON(w, cancel)
	obs := &cellObserver{out: out, now: s.cfg.Now}
	run := func(cid string) (*airlock.CellResult, error) {
		return s.cfg.Sessions.RunCell(ctx, ref.tenant, ref.id, cid, airlock.RunCellRequest{
			Code: *req.Code, TimeoutSec: int(s.cfg.MaxProcessTimeout / time.Second),
		}, obs)
	}
	res, err := run(cid)
	if err != nil && name != "" && airlock.ErrorCode(err) == airlock.ENOTFOUND && !sandboxGone(err) && !obs.sawStart {
		// The default context was deleted: make it again.
		if cid, err = s.defaultContext(ctx, ref, lang, name, cid); err == nil {
			res, err = run(cid)
		}
	}
	obs.flush()
	if err != nil {
		if !out.begun() {
			out.close()
			if r.Context().Err() != nil {
				return nil // the client went away; the cell was interrupted
			}
			if sandboxGone(err) {
				return errGone(ref.id)
			}
			return err
		}
		_, msg, _ := httpStatus(err)
		out.send(map[string]any{"type": "error", "name": "AirlockError", "value": msg, "traceback": ""})
		out.send(map[string]any{"type": "end_of_execution"})
		out.close()
		return nil
	}
	for _, line := range resultLines(res) {
		out.send(line)
	}
	if res.Error != nil {
		out.send(map[string]any{"type": "error", "name": res.Error.Name, "value": res.Error.Value, "traceback": res.Error.Traceback})
	} else if res.TimedOut {
		out.send(map[string]any{"type": "error", "name": "TimeoutError", "value": "the cell ran past its timeout and was interrupted", "traceback": ""})
	}
	out.send(map[string]any{"type": "number_of_executions", "execution_count": s.countRun(ref, cid)})
	out.send(map[string]any{"type": "end_of_execution"})
	out.close()
	return nil
}

// countRun counts a cell of a context (E2B's execution count).
func (s *Server) countRun(ref *sandboxRef, cid string) int {
	ref.mu.Lock()
	defer ref.mu.Unlock()
	if ref.runs == nil {
		ref.runs = map[string]int{}
	}
	ref.runs[cid]++
	return ref.runs[cid]
}

// resultLines turns a cell's rich outputs and value into result lines:
// every figure a PNG result; display(obj) a text result with its HTML;
// the value of the final expression the main result, with the HTML that
// follows the displays (a DataFrame's).
func resultLines(res *airlock.CellResult) []map[string]any {
	var out []map[string]any
	var group map[string]any // the current display(obj)
	var mainHTML string
	for _, o := range res.Outputs {
		switch o.Type {
		case "text/plain":
			group = map[string]any{"type": "result", "is_main_result": false, "text": o.Data}
			out = append(out, group)
		case "text/html":
			switch {
			case group != nil && group["html"] == nil:
				group["html"] = o.Data
			case res.Value != "" && mainHTML == "":
				mainHTML = o.Data
			default:
				out = append(out, map[string]any{"type": "result", "is_main_result": false, "html": o.Data})
			}
		case "image/png":
			out = append(out, map[string]any{"type": "result", "is_main_result": false, "png": o.Data, "text": "<Figure>"})
			group = nil
		}
	}
	if res.Value != "" {
		m := map[string]any{"type": "result", "is_main_result": true, "text": res.Value}
		if mainHTML != "" {
			m["html"] = mainHTML
		}
		out = append(out, m)
	}
	return out
}

// contextJSON is the code interpreter's Context.
type contextJSON struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request, ref *sandboxRef) error {
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decodeInterpreterBody(r, 64<<10, &req); err != nil {
		return err
	}
	lang, name, err := interpreterLanguage(req.Language)
	if err != nil {
		return err
	}
	cwd := home
	if req.Cwd != "" {
		cwd = req.Cwd
	}
	dir, err := toSandbox(cwd)
	if err != nil {
		return err
	}
	c, err := s.cfg.Sessions.CreateContext(r.Context(), ref.tenant, ref.id, airlock.CreateContextRequest{Language: lang})
	if err != nil {
		return err
	}
	if dir != workspace {
		// The interpreter starts in the workspace; move it.
		q, _ := json.Marshal(dir)
		code := "__import__('os').chdir(" + string(q) + ")"
		if lang == airlock.ContextNode {
			code = "process.chdir(" + string(q) + ")"
		}
		res, err := s.cfg.Sessions.RunCell(r.Context(), ref.tenant, ref.id, c.ID, airlock.RunCellRequest{Code: code, TimeoutSec: 10}, nil)
		if err == nil && res.Error != nil {
			err = errorf(400, fmt.Sprintf("cwd %q: %s: %s", clip(cwd, 200), res.Error.Name, clip(res.Error.Value, 200)))
		}
		if err != nil {
			s.cfg.Sessions.DeleteContext(context.WithoutCancel(r.Context()), ref.tenant, ref.id, c.ID)
			return err
		}
	}
	ref.mu.Lock()
	if ref.cwds == nil {
		ref.cwds = map[string]string{}
	}
	ref.cwds[c.ID] = fromSandbox(dir)
	ref.mu.Unlock()
	writeJSON(w, http.StatusOK, contextJSON{ID: c.ID, Language: name, Cwd: fromSandbox(dir)})
	return nil
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request, ref *sandboxRef) error {
	cs, err := s.cfg.Sessions.ListContexts(r.Context(), ref.tenant, ref.id)
	if err != nil {
		return err
	}
	out := make([]contextJSON, 0, len(cs))
	ref.mu.Lock()
	for _, c := range cs {
		cwd := ref.cwds[c.ID]
		if cwd == "" {
			cwd = home
		}
		out = append(out, contextJSON{ID: c.ID, Language: e2bLanguage(c.Language), Cwd: cwd})
	}
	ref.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request, ref *sandboxRef, cid string) error {
	if err := s.cfg.Sessions.DeleteContext(r.Context(), ref.tenant, ref.id, cid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request, ref *sandboxRef, cid string) error {
	if _, err := s.cfg.Sessions.RestartContext(r.Context(), ref.tenant, ref.id, cid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
