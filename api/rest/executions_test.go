package rest_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestGetExecution(t *testing.T) {
	e := newEnv(t)
	e.exec.setFiles(testFile{"a.txt", "text/plain", "A"})
	run := e.execute(e.keyA, okBody)
	id := run["execution_id"].(string)

	var got airlock.Execution
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/executions/" + id, key: e.keyA}), http.StatusOK, &got)
	if got.ID != id || got.TenantID != e.tenantA.ID || got.ExitCode != 3 || got.Stdout != "hello\n" ||
		got.Status != airlock.StatusCompleted {
		t.Errorf("got %+v", got)
	}
	if len(got.Artifacts) != 1 || !strings.HasPrefix(got.Artifacts[0].URL, e.srv.URL+"/v1/artifacts/"+got.Artifacts[0].ID+"?") {
		t.Fatalf("artifacts %+v lack signed URLs", got.Artifacts)
	}
	// The fresh URL downloads.
	resp := e.doURL(req{method: "GET"}, got.Artifacts[0].URL)
	if b := readBody(t, resp); resp.StatusCode != 200 || string(b) != "A" {
		t.Errorf("download: %d %q", resp.StatusCode, b)
	}

	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/missing", key: e.keyA}), 404, "not-found")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/" + id}), 401, "unauthorized")
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	e.exec.setFiles(testFile{"secret.txt", "text/plain", "A's secret"})
	run := e.execute(e.keyA, okBody)
	execID := run["execution_id"].(string)
	art := run["artifacts"].([]any)[0].(map[string]any)
	artID, artURL := art["id"].(string), art["url"].(string)

	// B's own run, so B's list is not empty.
	e.exec.setFiles()
	e.execute(e.keyB, okBody)

	t.Run("execution with B's key", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/" + execID, key: e.keyB}), 404, "not-found")
	})
	t.Run("list with B's key", func(t *testing.T) {
		e.t = t
		var page airlock.ExecutionPage
		decodeJSON(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyB}), 200, &page)
		if len(page.Executions) != 1 || page.Executions[0].TenantID != e.tenantB.ID {
			t.Errorf("B sees %+v", page.Executions)
		}
	})
	t.Run("B's cursor is not A's", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/executions?before=" + execID, key: e.keyB}), 400, "invalid-cursor")
	})
	t.Run("artifact with B's key", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/artifacts/" + artID, key: e.keyB}), 404, "not-found")
	})
	t.Run("artifact without any key", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/artifacts/" + artID}), 404, "not-found")
	})
	t.Run("A's link relabelled for B", func(t *testing.T) {
		e.t = t
		u := strings.Replace(artURL, "tenant="+e.tenantA.ID, "tenant="+e.tenantB.ID, 1)
		if u == artURL {
			t.Fatal("URL has no tenant parameter")
		}
		wantProblem(t, e.doURL(req{method: "GET"}, u), 404, "not-found")
	})
	t.Run("B's key on A's valid link", func(t *testing.T) {
		// The link itself is the authority: whoever holds it may download.
		e.t = t
		resp := e.doURL(req{method: "GET", key: e.keyB}, artURL)
		if b := readBody(t, resp); resp.StatusCode != 200 || string(b) != "A's secret" {
			t.Errorf("got %d %q", resp.StatusCode, b)
		}
	})
	t.Run("A's key on A's artifact", func(t *testing.T) {
		e.t = t
		resp := e.do(req{method: "GET", path: "/v1/artifacts/" + artID, key: e.keyA})
		if b := readBody(t, resp); resp.StatusCode != 200 || string(b) != "A's secret" {
			t.Errorf("got %d %q", resp.StatusCode, b)
		}
	})
}

func TestListExecutionsPagination(t *testing.T) {
	e := newEnv(t)
	e.exec.setFiles(testFile{"f.txt", "text/plain", "x"})
	var created []string
	for range 5 {
		created = append(created, e.execute(e.keyA, okBody)["execution_id"].(string))
	}
	slices.Reverse(created) // newest first

	var seen []string
	path := "/v1/executions?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		var page airlock.ExecutionPage
		resp := e.do(req{method: "GET", path: path, key: e.keyA})
		body := decodeJSON(t, resp, 200, &page)
		if !strings.Contains(string(body), `"executions":[`) {
			t.Errorf("executions not an array: %s", body)
		}
		for _, x := range page.Executions {
			seen = append(seen, x.ID)
			if x.Artifacts == nil {
				t.Errorf("listed execution %s has artifacts null", x.ID)
			}
		}
		if len(page.Executions) > 2 {
			t.Fatalf("page of %d, limit 2", len(page.Executions))
		}
		if page.NextCursor == "" {
			break
		}
		if page.NextCursor != page.Executions[len(page.Executions)-1].ID {
			t.Errorf("next_cursor %q is not the page's last ID", page.NextCursor)
		}
		path = "/v1/executions?limit=2&before=" + page.NextCursor
	}
	if !slices.Equal(seen, created) {
		t.Errorf("paged IDs %v, want %v", seen, created)
	}

	// Default limit: everything, no cursor.
	var all airlock.ExecutionPage
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/executions", key: e.keyA}), 200, &all)
	if len(all.Executions) != 5 || all.NextCursor != "" {
		t.Errorf("default page: %d executions, cursor %q", len(all.Executions), all.NextCursor)
	}

	for _, bad := range []string{"0", "501", "-1", "abc", "", "2.5", "1e3"} {
		t.Run("limit="+bad, func(t *testing.T) {
			e.t = t
			wantProblem(t, e.do(req{method: "GET", path: "/v1/executions?limit=" + bad, key: e.keyA}), 400, "invalid-limit")
		})
	}
	t.Run("unknown cursor", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/executions?before=nope", key: e.keyA}), 400, "invalid-cursor")
	})
	t.Run("no key", func(t *testing.T) {
		e.t = t
		wantProblem(t, e.do(req{method: "GET", path: "/v1/executions"}), 401, "unauthorized")
	})
}
