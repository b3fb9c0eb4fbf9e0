package rest

import (
	"bytes"
	"encoding/json"
)

// withMember marshals v, a JSON object, with one more member first: a
// type that embeds a value with its own MarshalJSON would lose its other
// fields to the promoted method.
func withMember(v any, name string, value any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	head, err := json.Marshal(map[string]any{name: value})
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if string(body) == "null" || string(body) == "{}" {
		return head, nil
	}
	out := append(head[:len(head)-1:len(head)-1], ',')
	return append(out, body[1:]...), nil
}
