package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// outputFlags are -o/--output json|table, on every command that prints
// data, and the old --json where a command had it (a deprecated spelling
// of -o json).
type outputFlags struct {
	format     string
	oldJSON    bool
	deprecated io.Writer // where the --json warning goes
}

// register adds -o and --output; withJSON adds --json too.
func (o *outputFlags) register(fs *flag.FlagSet, withJSON bool) {
	set := func(v string) error {
		switch v {
		case formatJSON, formatTable:
			o.format = v
			return nil
		}
		return fmt.Errorf("want json or table")
	}
	fs.Func("o", "output format: json or table", set)
	fs.Func("output", "output format: json or table", set)
	if withJSON {
		fs.BoolFunc("json", "deprecated: -o json", func(string) error {
			o.format, o.oldJSON = formatJSON, true
			return nil
		})
	}
}

// json reports whether JSON was asked for; the first call after --json
// warns that it is deprecated.
func (o *outputFlags) json(std stdio) bool {
	if o.oldJSON {
		o.oldJSON = false
		fmt.Fprintln(std.err, "airlock: --json is deprecated and goes in the next release; use -o json")
	}
	return o.format == formatJSON
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// table prints rows under a header, aligned; every cell is made
// printable.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = strings.ReplaceAll(printableText(fmt.Sprint(c)), "\t", " ")
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// writeRecord prints one JSON-encodable record as FIELD VALUE lines, in
// the record's own order, nested objects as dotted names and lists of
// scalars joined by commas; null and empty members are left out.
func writeRecord(w io.Writer, v any) error {
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var fields [][2]string
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := flatten(dec, "", &fields); err != nil {
		return err
	}
	t := newTable(w, "FIELD", "VALUE")
	for _, f := range fields {
		t.row(f[0], f[1])
	}
	return t.flush()
}

// flatten reads one JSON value from dec and appends its fields under
// prefix.
func flatten(dec *json.Decoder, prefix string, out *[][2]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch d := tok.(type) {
	case json.Delim:
		if d == '{' {
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name := fmt.Sprint(k)
				if prefix != "" {
					name = prefix + "." + name
				}
				if err := flatten(dec, name, out); err != nil {
					return err
				}
			}
			_, err := dec.Token() // '}'
			return err
		}
		// An array: scalars joined, objects as compact JSON.
		var parts []string
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				parts = append(parts, s)
			} else {
				parts = append(parts, string(raw))
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return err
		}
		if len(parts) > 0 {
			*out = append(*out, [2]string{prefix, strings.Join(parts, ",")})
		}
		return nil
	case nil:
		return nil
	case string:
		if d != "" {
			*out = append(*out, [2]string{prefix, d})
		}
		return nil
	default:
		*out = append(*out, [2]string{prefix, fmt.Sprint(d)})
		return nil
	}
}

// writeListJSON prints the first array member of a JSON object (or the
// array itself) as a table: a column per scalar member of its first
// element, in that element's order; nested values as compact JSON.
func writeListTable(w io.Writer, raw []byte) error {
	list, err := firstArray(raw)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "(none)")
		return nil
	}
	var cols []string
	var fields [][2]string
	dec := json.NewDecoder(bytes.NewReader(list[0]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		for _, e := range list {
			fmt.Fprintln(w, printableText(string(e)))
		}
		return nil
	}
	for dec.More() {
		k, _ := dec.Token()
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
		cols = append(cols, fmt.Sprint(k))
	}
	_ = fields
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(c)
	}
	t := newTable(w, header...)
	for _, e := range list {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e, &m); err != nil {
			return err
		}
		cells := make([]any, len(cols))
		for i, c := range cols {
			cells[i] = cellText(m[c])
		}
		t.row(cells...)
	}
	return t.flush()
}

// cellText is a JSON value as a table cell.
func cellText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		raw = buf.Bytes()
	}
	if len(raw) > 80 {
		return string(raw[:77]) + "..."
	}
	return string(raw)
}

// firstArray returns the elements of raw if it is an array, else of the
// first array member of the object raw.
func firstArray(raw []byte) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		return list, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("the answer is not a JSON object")
	}
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if json.Unmarshal(v, &list) == nil {
			return list, nil
		}
	}
	return nil, nil
}
