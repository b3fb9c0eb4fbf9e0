package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/mcp"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// chartCode is the README's chart example.
const chartCode = `import matplotlib.pyplot as plt
plt.figure(figsize=(6,3))
plt.plot([1,2,3,4],[10,25,18,35],color="#3b82f6")
plt.title("Agent Performance")
plt.savefig("output.png")
print("saved")`

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// newStack is a node with /mcp mounted beside the REST API, as airlockd
// serves it, where a tenant may hold one session at a time (so the quota
// refusal is quick to reach).
func newStack(t *testing.T) *teststack.Stack {
	t.Helper()
	return teststack.New(t, teststack.Options{
		MaxTimeout: 60 * time.Second,
		Admission:  provision.Admission{SessionsPerTenant: 1},
		Serve: func(s *teststack.Stack, api http.Handler) http.Handler {
			h, err := mcp.NewHandler(mcp.HandlerConfig{API: api, Keys: s.Store, Logger: s.Logger})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("/mcp", h)
			mux.Handle("/", api)
			return mux
		},
	})
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP is a real MCP client on /mcp with key.
func connectHTTP(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "mcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:             url + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{key}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var (
	buildOnce sync.Once
	builtCLI  string
	buildErr  error
)

// cli builds cmd/airlock once per test binary.
func cli(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-mcp-cli-")
		if err != nil {
			buildErr = err
			return
		}
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = err
			return
		}
		builtCLI = filepath.Join(dir, "airlock")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtCLI, "./cmd/airlock")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatalf("build cmd/airlock: %v", buildErr)
	}
	t.Cleanup(func() {}) // the binary's directory is removed in TestMain
	return builtCLI
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if builtCLI != "" {
		os.RemoveAll(filepath.Dir(builtCLI))
	}
	os.Exit(code)
}

// connectStdio starts `airlock mcp` and connects a real MCP client to it
// over its stdin and stdout.
func connectStdio(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	bin := cli(t)
	cmd := exec.Command(bin, "mcp", "--url", url)
	cmd.Env = append(os.Environ(), "AIRLOCK_API_KEY="+key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "mcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to airlock mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close airlock mcp: %v\n%s", err, stderr.String())
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
			t.Errorf("airlock mcp still running after the client closed")
		}
	})
	return cs
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured result.
func ok(t *testing.T, cs *sdk.ClientSession, name string, args, out any) *sdk.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// toolError calls a tool that must fail with a tool error (not a
// protocol error) whose text contains every one of want.
func toolError(t *testing.T, cs *sdk.ClientSession, name string, args any, want ...string) {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s(%v): not a tool error: %s", name, args, text(res))
	}
	for _, w := range want {
		if !strings.Contains(text(res), w) {
			t.Errorf("%s(%v): tool error %q does not mention %q", name, args, text(res), w)
		}
	}
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func images(res *sdk.CallToolResult) []*sdk.ImageContent {
	var out []*sdk.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*sdk.ImageContent); ok {
			out = append(out, ic)
		}
	}
	return out
}

// TestMCP runs the same agent's work over both transports: /mcp on the
// server (streamable HTTP) and `airlock mcp` (stdio), each against the
// real REST API, sandboxes and store.
func TestMCP(t *testing.T) {
	s := newStack(t)
	a := s.NewTenant(t, "mcp-a")
	b := s.NewTenant(t, "mcp-b")
	for _, tr := range []struct {
		name    string
		connect func(t *testing.T, url, key string) *sdk.ClientSession
	}{
		{"http", connectHTTP},
		{"stdio", connectStdio},
	} {
		t.Run(tr.name, func(t *testing.T) {
			cs := tr.connect(t, s.URL, a.Key)
			t.Run("tools", func(t *testing.T) { checkTools(t, cs) })
			t.Run("chart", func(t *testing.T) {
				e := runChart(t, cs)
				// The run is recorded like any other, with the MCP
				// client as its agent.
				rec, err := a.Client.Execution(context.Background(), e.ID)
				if err != nil {
					t.Fatal(err)
				}
				if rec.AgentID != "mcp/mcp-test" || rec.ExitCode != 0 || len(rec.Artifacts) != 1 {
					t.Errorf("record: agent %q, exit %d, %d artifacts", rec.AgentID, rec.ExitCode, len(rec.Artifacts))
				}
			})
			t.Run("session", func(t *testing.T) {
				other := connectHTTP(t, s.URL, b.Key)
				sessionRoundTrip(t, cs, other)
			})
			t.Run("errors", func(t *testing.T) { toolErrors(t, cs) })
			t.Run("policy", func(t *testing.T) { policyRefusals(t, cs, a) })
		})
	}
}

func checkTools(t *testing.T, cs *sdk.ClientSession) {
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.OutputSchema == nil {
			t.Errorf("tool %s: no description or output schema", tool.Name)
		}
		in, _ := tool.InputSchema.(map[string]any)
		props, _ := in["properties"].(map[string]any)
		if len(props) == 0 {
			t.Errorf("tool %s: input schema without properties: %v", tool.Name, tool.InputSchema)
		}
		for name, p := range props {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("tool %s: input %q has no description", tool.Name, name)
			}
		}
	}
	want := slices.Clone(mcp.ToolNames)
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

func runChart(t *testing.T, cs *sdk.ClientSession) airlock.Execution {
	var e airlock.Execution
	res := ok(t, cs, "run_code", map[string]any{"language": "python", "code": chartCode, "timeout_s": 30}, &e)
	if e.ExitCode != 0 || e.Stdout != "saved\n" || len(e.Artifacts) != 1 || e.Artifacts[0].Filename != "output.png" {
		t.Fatalf("chart: %+v", e)
	}
	imgs := images(res)
	if len(imgs) != 1 || imgs[0].MIMEType != "image/png" || !bytes.HasPrefix(imgs[0].Data, pngMagic) ||
		int64(len(imgs[0].Data)) != e.Artifacts[0].SizeBytes {
		t.Fatalf("chart: want the PNG as image content, got %d images (%v)", len(imgs), res.Content)
	}
	if !strings.Contains(text(res), "exit_code: 0") || !strings.Contains(text(res), "output.png") {
		t.Errorf("chart text: %s", text(res))
	}
	return e
}

func sessionRoundTrip(t *testing.T, cs, other *sdk.ClientSession) {
	var sess airlock.Session
	ok(t, cs, "create_session", map[string]any{"image": "python-ds", "timeout_s": 300, "idempotency_key": "mcp-test-" + time.Now().Format("150405.000000")}, &sess)
	if sess.ID == "" || sess.State != airlock.SessionReady {
		t.Fatalf("session: %+v", sess)
	}
	deleted := false
	defer func() {
		if !deleted {
			call(t, cs, "delete_session", map[string]any{"session_id": sess.ID})
		}
	}()
	id := sess.ID

	// The tenant's quota is one session: a second is refused, as a tool
	// error that says when to retry.
	toolError(t, cs, "create_session", map[string]any{"image": "base"}, "session-quota", "HTTP 429", "retry after")
	// Another tenant cannot reach it.
	toolError(t, other, "exec", map[string]any{"session_id": id, "shell": "true"}, "session-not-found", "HTTP 404")

	var put airlock.PutFileResult
	ok(t, cs, "write_file", map[string]any{"session_id": id, "path": "data.csv", "content": "x,y\n1,10\n2,25\n3,18\n"}, &put)
	if put.Size != 19 {
		t.Errorf("write_file: %+v", put)
	}
	ok(t, cs, "write_file", map[string]any{"session_id": id, "path": "blob.bin", "content": "AAEC/w==", "encoding": "base64"}, nil)

	var e airlock.Execution
	res := ok(t, cs, "exec", map[string]any{"session_id": id, "shell": "wc -l < data.csv; echo oops >&2; exit 3"}, &e)
	if e.ExitCode != 3 || strings.TrimSpace(e.Stdout) != "4" || e.Stderr != "oops\n" || res.IsError {
		t.Errorf("exec: exit %d stdout %q stderr %q", e.ExitCode, e.Stdout, e.Stderr)
	}

	var cell airlock.CellResult
	ok(t, cs, "run_cell", map[string]any{"session_id": id, "code": "import pandas as pd\ndf = pd.read_csv('data.csv')\ntotal = int(df.y.sum())"}, &cell)
	res = ok(t, cs, "run_cell", map[string]any{"session_id": id, "code": "import matplotlib.pyplot as plt\nplt.plot(df.x, df.y)\ntotal + 0"}, &cell)
	if cell.Value != "53" || cell.Error != nil {
		t.Errorf("cell: value %q error %+v (state kept between cells?)", cell.Value, cell.Error)
	}
	if imgs := images(res); len(imgs) != 1 || !bytes.HasPrefix(imgs[0].Data, pngMagic) {
		t.Errorf("cell: want one figure as image content, got %d", len(imgs))
	}
	for _, o := range cell.Outputs {
		if o.Type == "image/png" && o.Data != "" {
			t.Errorf("cell: the structured copy carries the image again (%d bytes)", len(o.Data))
		}
	}
	ok(t, cs, "run_cell", map[string]any{"session_id": id, "code": "1/0"}, &cell)
	if cell.Error == nil || cell.Error.Name != "ZeroDivisionError" {
		t.Errorf("cell error: %+v", cell.Error)
	}

	var rf mcp.ReadFileOutput
	ok(t, cs, "read_file", map[string]any{"session_id": id, "path": "data.csv"}, &rf)
	if rf.Encoding != "utf-8" || rf.Content != "x,y\n1,10\n2,25\n3,18\n" || rf.Truncated {
		t.Errorf("read_file: %+v", rf)
	}
	ok(t, cs, "read_file", map[string]any{"session_id": id, "path": "data.csv", "max_bytes": 5}, &rf)
	if rf.Content != "x,y\n1" || !rf.Truncated {
		t.Errorf("read_file cut: %+v", rf)
	}
	ok(t, cs, "read_file", map[string]any{"session_id": id, "path": "blob.bin"}, &rf)
	if rf.Encoding != "base64" || rf.Content != "AAEC/w==" {
		t.Errorf("read_file binary: %+v", rf)
	}

	var list airlock.FileList
	ok(t, cs, "list_files", map[string]any{"session_id": id}, &list)
	var names []string
	for _, e := range list.Entries {
		names = append(names, e.Name)
	}
	if !slices.Contains(names, "data.csv") || !slices.Contains(names, "blob.bin") {
		t.Errorf("list_files: %v", names)
	}

	ok(t, cs, "delete_session", map[string]any{"session_id": id}, &sess)
	deleted = true
	if sess.State != airlock.SessionDestroyed || sess.EndReason != airlock.EndDeleted {
		t.Errorf("delete_session: %+v", sess)
	}
	toolError(t, cs, "exec", map[string]any{"session_id": id, "shell": "true"}, "HTTP")
}

func toolErrors(t *testing.T, cs *sdk.ClientSession) {
	// Refused by the schema, before the API.
	toolError(t, cs, "run_code", map[string]any{"language": "cobol", "code": "DISPLAY 'HI'."}, "language")
	toolError(t, cs, "run_code", map[string]any{"language": "bash"}, "code")
	toolError(t, cs, "run_code", map[string]any{"language": "bash", "code": "true", "color": "red"}, "color")
	toolError(t, cs, "run_code", map[string]any{"language": "bash", "code": 7}, "code")
	// Refused by the API, with its problem type.
	toolError(t, cs, "run_code", map[string]any{"language": "bash", "code": "true", "timeout_s": 100000}, "timeout-out-of-range", "HTTP 400")
	toolError(t, cs, "run_code", map[string]any{"language": "bash", "code": "true", "image": "nope"}, "HTTP 4")
	toolError(t, cs, "exec", map[string]any{"session_id": "nope", "shell": "true"}, "HTTP 404")
	toolError(t, cs, "exec", map[string]any{"session_id": "", "shell": "true"}, "session_id")
	toolError(t, cs, "write_file", map[string]any{"session_id": "x", "path": "a", "content": "%%%", "encoding": "base64"}, "base64")
	toolError(t, cs, "read_file", map[string]any{"session_id": "x", "path": "a", "max_bytes": 1 << 30}, "max_bytes")
	// A failing program is a result, not a tool error.
	var e airlock.Execution
	ok(t, cs, "run_code", map[string]any{"language": "bash", "code": "echo no >&2; exit 7"}, &e)
	if e.ExitCode != 7 || e.Stderr != "no\n" {
		t.Errorf("failing program: %+v", e)
	}
	// An unknown tool is the protocol's error.
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil {
		t.Errorf("unknown tool: no error")
	}
}

// policyRefusals: what the tenant's policy forbids (an isolation below its
// floor; a network when it has no allow list) is refused through MCP as
// the REST API refuses it, with the same problem, as a tool error and
// never a protocol error, and nothing is run or recorded.
func policyRefusals(t *testing.T, cs *sdk.ClientSession, tn teststack.Tenant) {
	ctx := context.Background()
	if tn.FirstParty {
		t.Fatal("the tenant must not be first-party: its floor is then container isolation")
	}
	before, err := tn.Client.ListExecutions(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
		// rest makes the same request through the REST API.
		rest   func() error
		status int
		slug   string
	}{
		{"run_code below the floor", "run_code",
			map[string]any{"language": "bash", "code": "echo ran", "isolation": "container"},
			func() error {
				_, err := tn.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo ran", Isolation: airlock.IsolationContainer})
				return err
			}, 403, airlock.ProblemIsolationNotAllowed},
		{"run_code with a network, no allow list", "run_code",
			map[string]any{"language": "bash", "code": "echo ran", "allow_network": true},
			func() error {
				_, err := tn.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo ran", AllowNetwork: true})
				return err
			}, 403, "network-unavailable"},
		{"create_session below the floor", "create_session",
			map[string]any{"image": "base", "isolation": "container"},
			func() error {
				_, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Isolation: airlock.IsolationContainer})
				return err
			}, 403, airlock.ProblemIsolationNotAllowed},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ce *client.Error
			if err := c.rest(); !errors.As(err, &ce) || ce.Status != c.status || ce.Type != client.ProblemTypePrefix+c.slug {
				t.Fatalf("REST: %v, want HTTP %d %s", err, c.status, c.slug)
			}
			res := call(t, cs, c.tool, c.args)
			if !res.IsError {
				t.Fatalf("not a tool error: %s", text(res))
			}
			want := fmt.Sprintf("(problem %s, HTTP %d)", c.slug, c.status)
			if got := text(res); !strings.Contains(got, want) || !strings.Contains(got, ce.Detail) {
				t.Errorf("tool error %q, want the REST API's %q and %q", got, want, ce.Detail)
			}
			if res.StructuredContent != nil || len(images(res)) > 0 {
				t.Errorf("a refusal carries a result: %v", res.StructuredContent)
			}
		})
	}
	after, err := tn.Client.ListExecutions(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Executions) != len(before.Executions) {
		t.Errorf("refused runs were recorded: %d executions, were %d", len(after.Executions), len(before.Executions))
	}
	sessions, err := tn.Client.ListSessions(ctx, client.ListSessionsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions.Sessions {
		if s.State.Live() {
			t.Errorf("a refused session is live: %+v", s)
		}
	}
}

// TestUnauthorized: /mcp refuses a request without a valid key with the
// REST API's 401 problem, before the MCP layer reads it.
func TestUnauthorized(t *testing.T) {
	s := newStack(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, key := range []string{"", "Bearer", "Bearer nope", "Basic abc"} {
		req, _ := http.NewRequest("POST", s.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p struct{ Type string }
		json.Unmarshal(b, &p)
		if resp.StatusCode != 401 || resp.Header.Get("Content-Type") != "application/problem+json" ||
			p.Type != "/problems/unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %s %s", key, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
}
