package e2e_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
)

// keyed adds an API key to every request.
type keyed struct{ key string }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAirlockdSurfaces checks what airlockd serves beside the REST API,
// through a real airlockd: the MCP server at /mcp, the console at
// /console/, and the session watch, which a clean stop ends at once
// (a watch lasts as long as its session, and sessions outlive a stop).
func TestAirlockdSurfaces(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "surfaces"})
	runsc := n.runsc
	d := n.start(quiet...)
	key := n.key()
	ctx := context.Background()

	// MCP: without a key, a 401 problem; with one, the tools, and a run
	// recorded like any other.
	send(t, "POST", d.url+"/mcp", "", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)).problem(t, 401)
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.url + "/mcp", HTTPClient: &http.Client{Transport: keyed{key}},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 8 {
		t.Fatalf("tools/list: %v, %d tools", err, len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "bash", "code": "echo via-mcp"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "via-mcp") {
		t.Fatalf("run_code: %v %+v", err, res)
	}
	cs.Close()
	cl := newClient(t, d.url, key)
	page, err := cl.ListExecutions(ctx, 1, "")
	if err != nil || len(page.Executions) != 1 {
		t.Fatalf("executions: %v %+v", err, page)
	}
	rec, err := cl.Execution(ctx, page.Executions[0].ID)
	if err != nil || rec.AgentID != "mcp/e2e" || rec.Stdout != "via-mcp\n" {
		t.Fatalf("the MCP run's record: %v %+v", err, rec)
	}

	// The console: its page under a strict policy, and a relative
	// redirect to it.
	r := send(t, "GET", d.url+"/console/", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(string(r.body), "app.js") {
		t.Errorf("GET /console/: %d %v %.200s", r.status, r.header, r.body)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(d.url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "console/" {
		t.Errorf("GET /console: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r := send(t, "GET", d.url+"/console/app.js", "", nil); r.status != 200 || !strings.Contains(string(r.body), "sessionStorage") {
		t.Errorf("GET /console/app.js: %d", r.status)
	}

	// A watch of a session; a clean stop ends it at once, with a problem
	// that says why, and airlockd exits.
	sess, _, err := cl.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", d.url+"/v1/sessions/"+sess.ID+"/output", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET output: %d", resp.StatusCode)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	if l := <-lines; l != "event: watching" {
		t.Fatalf("first line of the watch: %q", l)
	}
	start := time.Now()
	d.stop(t)
	var tail []string
	for l := range lines {
		tail = append(tail, l)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("airlockd took %v to stop with a watch open", took)
	}
	if got := strings.Join(tail, "\n"); !strings.Contains(got, "event: error") || !strings.Contains(got, "shutting-down") {
		t.Errorf("the watch's last events: %q", got)
	}
	_ = runsc
}
