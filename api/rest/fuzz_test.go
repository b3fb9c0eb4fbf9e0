package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// FuzzExecuteBody posts arbitrary bodies (and Content-Types) to
// POST /v1/execute: no panic, only the statuses a body can cause, and a
// problem document for every one that is not 200.
func FuzzExecuteBody(f *testing.F) {
	e := setup(f)
	e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
		return &airlock.Execution{ID: "e1", TenantID: tenant.ID, Language: req.Language, ExitCode: 1,
			Artifacts: []airlock.Artifact{{ID: "a1", Filename: "f"}}}, nil
	})
	for _, seed := range []struct{ body, ct string }{
		{okBody, "application/json"},
		{okBody, ""},
		{okBody, "text/plain"},
		{`{"language":"python","code":"x","timeout_sec":31}`, "application/json"},
		{`{"language":"python","code":"x","allow_network":true}`, "application/json"},
		{`{"language":"cobol"}`, "application/json"},
		{`{"language":"python","code":1}`, "application/json; charset=utf-8"},
		{`{"language":"python","code":"x"} {}`, "application/json"},
		{`[`, "application/json"},
		{`null`, "application/json"},
		{`"\ud800"`, "application/json"},
		{"", ""},
		{`{"language":"sql","code":"select 1","timeout_sec":1e400}`, "application/json"},
		{`{"language":"python","code":"` + strings.Repeat("\\u0000", 1000) + `"}`, "application/problem+json"},
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	allowed := map[int]bool{200: true, 400: true, 403: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		r := httptest.NewRequest("POST", "/v1/execute", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+e.keyA)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		if !allowed[w.Code] {
			t.Fatalf("status %d for %q (%q): %s", w.Code, body, ct, w.Body)
		}
		if w.Code == http.StatusOK {
			var ex airlock.Execution
			if err := json.Unmarshal(w.Body.Bytes(), &ex); err != nil {
				t.Fatalf("200 with a body that is not an execution: %v", err)
			}
			return
		}
		mt, _, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
		if err != nil || mt != rest.ProblemContentType {
			t.Fatalf("status %d with Content-Type %q", w.Code, w.Header().Get("Content-Type"))
		}
		var p rest.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code ||
			!strings.HasPrefix(p.Type, rest.ProblemTypePrefix) {
			t.Fatalf("bad problem %s (%v)", w.Body, err)
		}
	})
}

// fuzzBody is the target of FuzzDecodeJSON: a struct with a nested
// struct, a map and a raw value, like the API's request types.
type fuzzBody struct {
	A  string          `json:"a"`
	N  int             `json:"n,omitempty"`
	In *fuzzInner      `json:"in,omitempty"`
	M  map[string]int  `json:"m,omitempty"`
	R  json.RawMessage `json:"r,omitempty"`
}

type fuzzInner struct {
	X bool     `json:"x"`
	L []string `json:"l,omitempty"`
}

// nameFacts is what an independent reading of a body (encoding/json's
// tokenizer) finds about its member names: the paths of members given
// twice in one object, and of members fuzzBody and fuzzInner do not know
// (compared exactly), rendered as the problems render them.
type nameFacts struct {
	duplicates, unknown map[string]bool
}

func readNames(body []byte) nameFacts {
	f := nameFacts{duplicates: map[string]bool{}, unknown: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	known := map[string]map[string]bool{
		"body":  {"a": true, "n": true, "in": true, "m": true, "r": true},
		"inner": {"x": true, "l": true},
	}
	join := func(path, name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	// value reads one value at path; kind says what the target is there:
	// "body", "inner", or "" for anything whose names are not checked.
	var value func(path, kind string) bool
	value = func(path, kind string) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					return false
				}
				name := t.(string)
				p := join(path, name)
				if seen[name] {
					f.duplicates[p] = true
				}
				seen[name] = true
				sub := ""
				if kind != "" && !known[kind][name] {
					f.unknown[p] = true
				}
				if kind == "body" && name == "in" {
					sub = "inner"
				}
				if !value(p, sub) {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if !value(join(path, strconv.Itoa(i)), "") {
					return false
				}
			}
			_, err := dec.Token()
			return err == nil
		}
		return true
	}
	value("", "body")
	return f
}

// detailField returns the member a problem's detail names (quoted, after
// "field ").
func detailField(detail string) string {
	_, rest, ok := strings.Cut(detail, "field ")
	if !ok {
		return ""
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	name, _ := strconv.Unquote(q)
	return name
}

// named reports whether the problem's name for a member is one of set
// (names longer than the problem shows are cut and end in "...").
func named(name string, set map[string]bool) bool {
	if set[name] {
		return true
	}
	prefix, cut := strings.CutSuffix(name, "...")
	for k := range set {
		if cut && strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// FuzzDecodeJSON checks the request decoder against encoding/json: a body
// it takes is valid JSON with no member given twice and none unknown,
// decoding to what encoding/json makes of it; a body it refuses for a
// member names one that is really unknown or really given twice; and
// every refusal is a client error of a known problem type.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":"x","n":1,"in":{"x":true,"l":["p"]},"m":{"k":1},"r":{"any":[1,{"b":2}]}}`,
		`{"a":"x","a":"y"}`, `{"A":"x"}`, `{"in":{"X":true}}`, `{"m":{"k":1,"k":2}}`,
		`{"r":{"q":1,"q":2}}`, `{"in":{"l":["a"],"l":[]}}`, `{"zz":1}`, `{"\u0061":"x"}`,
		`{"a":"x"} {}`, `{"a":"x"}x`, `[]`, `null`, ``, `{"n":1.5}`, `{"n":"1"}`, "{\"a\":\"\xff\"}",
		`{"a":"\ud800"}`, `{"in":null}`, `{"in":[]}`, `{"r":1}`,
	} {
		f.Add([]byte(s))
	}
	types := map[string]bool{"invalid-json": true, "unknown-field": true, "duplicate-field": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got fuzzBody
		err := rest.DecodeJSON(body, &got)
		facts := readNames(body)
		if err == nil {
			if !json.Valid(bytes.TrimSpace(body)) && strings.TrimSpace(string(body)) != "" {
				t.Fatalf("took %q, which is not valid JSON", body)
			}
			if len(facts.duplicates) > 0 || len(facts.unknown) > 0 {
				t.Fatalf("took %q with duplicates %v and unknown members %v", body, facts.duplicates, facts.unknown)
			}
			var want fuzzBody
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatalf("took %q, which encoding/json refuses: %v", body, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q decoded to %+v; encoding/json makes %+v", body, got, want)
			}
			return
		}
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Code != airlock.EINVALID || !types[ae.Type] {
			t.Fatalf("%q: error %v is not a client error of a known type", body, err)
		}
		switch field := detailField(ae.Message); ae.Type {
		case "unknown-field":
			if !named(field, facts.unknown) {
				t.Fatalf("%q: %q named as unknown; unknown are %v", body, field, facts.unknown)
			}
		case "duplicate-field":
			if !named(field, facts.duplicates) {
				t.Fatalf("%q: %q named as given twice; duplicates are %v", body, field, facts.duplicates)
			}
		}
	})
}
