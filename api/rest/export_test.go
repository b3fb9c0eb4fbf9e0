package rest

import "bytes"

// Route is one entry of the route table, for the black-box tests.
type Route struct {
	Method, Pattern string
	Auth            string // "none", "bearer", "optional" or "admin"
}

// RouteTable returns the table New registers.
func RouteTable() []Route {
	out := make([]Route, 0, len(routes))
	for _, r := range routes {
		auth := map[authMode]string{authNone: "none", authBearer: "bearer", authOptional: "optional", authAdmin: "admin"}[r.auth]
		out = append(out, Route{Method: r.method, Pattern: r.pattern, Auth: auth})
	}
	return out
}

// DecodeJSON decodes a request body into v the way every handler does
// (without the size limit, which needs a request).
func DecodeJSON(body []byte, v any) error { return decodeReader(bytes.NewReader(body), v) }
