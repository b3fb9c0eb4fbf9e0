package mcp

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/airlockhq/airlock"
)

// prop describes one property of a tool's input: what an LLM needs to
// fill it in, and the values it may take.
type prop struct {
	desc string
	enum []any
	min  *float64
}

// schemaOf derives the JSON schema of T, the domain type the REST API
// takes or returns (or a tool's wrapper around it), and adds a
// description to the schema and to each property named in props. A
// property named there that T does not have panics at start, so the
// descriptions cannot drift from the types; a test checks that every
// input property has one.
func schemaOf[T any](desc string, props map[string]prop) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(T), err))
	}
	s.Description = desc
	withOldNames(s, reflect.TypeFor[T]())
	for name, p := range props {
		ps := lookup(s, name)
		if ps == nil {
			panic(fmt.Sprintf("mcp: schema of %T has no property %q", *new(T), name))
		}
		ps.Description = p.desc
		if p.enum != nil {
			ps.Enum = p.enum
		}
		if p.min != nil {
			ps.Minimum = p.min
		}
	}
	return s
}

// lookup finds a property by a dotted path ("network.mode"), following
// arrays to their items.
func lookup(s *jsonschema.Schema, path string) *jsonschema.Schema {
	cur := s
	for _, name := range strings.Split(path, ".") {
		if cur.Items != nil && cur.Properties == nil {
			cur = cur.Items
		}
		if cur = cur.Properties[name]; cur == nil {
			return nil
		}
	}
	return cur
}

func enumOf[S ~string](xs []S) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

func minimum(v float64) *float64 { return &v }

// withOldNames adds to the schema of t, and of the types it holds, the
// old names of renamed response fields (airlock.RenamedFields), which the
// domain types send beside the new ones for one release: an output
// schema without them would refuse the answer.
func withOldNames(s *jsonschema.Schema, t reflect.Type) {
	for s != nil && t != nil {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
			continue
		case reflect.Slice, reflect.Array:
			s, t = s.Items, t.Elem()
			continue
		}
		break
	}
	if s == nil || t == nil || t.Kind() != reflect.Struct || s.Properties == nil {
		return
	}
	if t.PkgPath() == reflect.TypeFor[airlock.RenamedField]().PkgPath() {
		for _, f := range airlock.RenamedFieldsOf(t.Name()) {
			if f.Input {
				continue
			}
			if cur, ok := s.Properties[f.New]; ok {
				if _, dup := s.Properties[f.Old]; !dup {
					old := *cur
					old.Deprecated = true
					old.Description = "Deprecated: the same as " + f.New + "."
					s.Properties[f.Old] = &old
				}
			}
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			withOldNames(s, f.Type)
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		withOldNames(s.Properties[name], f.Type)
	}
}
