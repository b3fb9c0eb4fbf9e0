package rest_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
			Enum       []string                   `json:"enum"`
		} `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	Security *[]map[string][]string `json:"security"`
}

func fetchOpenAPI(t *testing.T, e *env) (*openAPIDoc, []byte) {
	t.Helper()
	var raw map[string]any
	body := decodeJSON(t, e.do(req{method: "GET", path: "/openapi.json"}), 200, &raw)
	var doc openAPIDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	return &doc, body
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// The document and the route table describe the same operations, with the
// same authentication, and each is really served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t)
	doc, _ := fetchOpenAPI(t, e)

	registered := map[string]rest.Route{}
	for _, r := range rest.RouteTable() {
		// A wildcard {x...} of net/http is the path parameter {x}.
		pattern := strings.ReplaceAll(r.Pattern, "...}", "}")
		key := strings.ToLower(r.Method) + " " + pattern
		registered[key] = r
		raw, ok := doc.Paths[pattern][strings.ToLower(r.Method)]
		if !ok {
			t.Errorf("route %s %s is not in openapi.json", r.Method, r.Pattern)
			continue
		}
		var op openAPIOperation
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		switch r.Auth {
		case "none":
			if op.Security == nil || len(*op.Security) != 0 {
				t.Errorf("%s is public but its security is %v", key, op.Security)
			}
		case "bearer", "admin":
			if op.Security != nil {
				t.Errorf("%s needs a key but overrides security: %v", key, *op.Security)
			}
		case "optional":
			if op.Security == nil || !slices.ContainsFunc(*op.Security, func(m map[string][]string) bool { return len(m) == 0 }) {
				t.Errorf("%s takes a signed URL but its security does not allow none: %v", key, op.Security)
			}
		}
	}
	for path, item := range doc.Paths {
		for method := range item {
			if !slices.Contains(httpMethods, method) {
				continue // parameters, summary and the like
			}
			if _, ok := registered[method+" "+path]; !ok {
				t.Errorf("openapi.json documents %s %s, which the server does not register", strings.ToUpper(method), path)
			}
			// Served: not a 405 and not an unknown route.
			e.t = t
			resp := e.do(req{method: strings.ToUpper(method), path: strings.ReplaceAll(path, "{id}", "x"), key: e.keyA})
			body := string(readBody(t, resp))
			notFound := resp.Header.Get("Content-Type") == rest.ProblemContentType && strings.Contains(body, "route-not-found")
			if resp.StatusCode == 405 || notFound {
				t.Errorf("%s %s is documented but not served: %d %s", method, path, resp.StatusCode, body)
			}
		}
	}
}

// Every $ref points at something.
func TestOpenAPIRefsResolve(t *testing.T) {
	e := newEnv(t)
	_, body := fetchOpenAPI(t, e)
	var root any
	if err := json.Unmarshal(body, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					ref := x.(string)
					if !strings.HasPrefix(ref, "#/") {
						t.Errorf("external $ref %q", ref)
						continue
					}
					var cur any = root
					for _, part := range strings.Split(ref[2:], "/") {
						m, ok := cur.(map[string]any)
						if !ok {
							cur = nil
							break
						}
						cur = m[part]
					}
					if cur == nil {
						t.Errorf("$ref %q does not resolve", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(root)
}

// jsonFields returns the JSON names of a struct's fields and those without
// omitempty.
func jsonFields(t reflect.Type) (all, required []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") {
			required = append(required, name)
		}
	}
	slices.Sort(all)
	slices.Sort(required)
	return all, required
}

// The schemas name exactly the JSON fields of the Go types, and require
// exactly those that are always sent.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	e := newEnv(t)
	doc, _ := fetchOpenAPI(t, e)
	tests := []struct {
		schema string
		typ    any
	}{
		{"ExecuteRequest", airlock.ExecuteRequest{}},
		{"SandboxExecuteRequest", rest.SandboxExecuteRequest{}},
		{"Execution", airlock.Execution{}},
		{"Artifact", airlock.Artifact{}},
		{"ExecutionPage", airlock.ExecutionPage{}},
		{"Problem", rest.Problem{}},
		{"GuardFinding", airlock.GuardFinding{}},
		{"Health", rest.Health{}},
		{"Usage", airlock.Usage{}},
		{"QuotaUsage", airlock.QuotaUsage{}},
		{"AbuseEvent", airlock.AbuseEvent{}},
		{"AbuseEventPage", airlock.AbuseEventPage{}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[tt.schema]
			if !ok {
				t.Fatalf("no schema %s", tt.schema)
			}
			var props []string
			for k := range s.Properties {
				props = append(props, k)
			}
			slices.Sort(props)
			required := slices.Clone(s.Required)
			slices.Sort(required)
			fields, always := jsonFields(reflect.TypeOf(tt.typ))
			fields = withDeprecated(t, s.Properties, tt.schema, fields)
			if !slices.Equal(props, fields) {
				t.Errorf("schema properties %v, Go JSON fields %v", props, fields)
			}
			if !slices.Equal(required, always) {
				t.Errorf("schema required %v, Go fields without omitempty %v", required, always)
			}
		})
	}

	var langs []string
	for _, l := range airlock.Languages {
		langs = append(langs, string(l))
	}
	if got := doc.Components.Schemas["Language"].Enum; !slices.Equal(got, langs) {
		t.Errorf("Language enum %v, want %v", got, langs)
	}
	statuses := []string{string(airlock.StatusRunning), string(airlock.StatusCompleted), string(airlock.StatusFailed), string(airlock.StatusBlocked)}
	if got := doc.Components.Schemas["ExecutionStatus"].Enum; !slices.Equal(got, statuses) {
		t.Errorf("ExecutionStatus enum %v, want %v", got, statuses)
	}
}

// withDeprecated adds to a Go type's JSON fields the old names of its
// renamed fields (airlock.RenamedFields), which the schema keeps for one
// release, marked deprecated.
func withDeprecated(t *testing.T, props map[string]json.RawMessage, schema string, fields []string) []string {
	t.Helper()
	for _, f := range airlock.RenamedFieldsOf(schema) {
		fields = append(fields, f.Old)
		var p struct {
			Deprecated bool `json:"deprecated"`
		}
		if raw, ok := props[f.Old]; ok {
			if json.Unmarshal(raw, &p); !p.Deprecated {
				t.Errorf("%s.%s (renamed to %s) is not marked deprecated", schema, f.Old, f.New)
			}
		}
	}
	slices.Sort(fields)
	return fields
}
