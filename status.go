package airlock

import "net/http"

// statusByCode is the one table from error code to HTTP status. The server
// answers with it and the client maps statuses back with it.
var statusByCode = map[string]int{
	EINVALID:        http.StatusBadRequest,
	EUNAUTHORIZED:   http.StatusUnauthorized,
	EFORBIDDEN:      http.StatusForbidden,
	ENOTFOUND:       http.StatusNotFound,
	ECONFLICT:       http.StatusConflict,
	ETOOLARGE:       http.StatusRequestEntityTooLarge,
	ERATELIMITED:    http.StatusTooManyRequests,
	EUNPROCESSABLE:  http.StatusUnprocessableEntity,
	EUNAVAILABLE:    http.StatusServiceUnavailable,
	ENOTIMPLEMENTED: http.StatusNotImplemented,
	EINTERNAL:       http.StatusInternalServerError,
}

// HTTPStatus returns the HTTP status of an error code; 500 for a code it
// does not know.
func HTTPStatus(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeForStatus maps an HTTP status back to an error code, for error
// responses that carry none (a proxy's 502, say): the table's reverse,
// 502 and 504 as unavailable, another 4xx as invalid and anything else as
// internal.
func CodeForStatus(status int) string {
	for code, s := range statusByCode {
		if s == status {
			return code
		}
	}
	switch {
	case status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return EUNAVAILABLE
	case status >= 400 && status < 500:
		return EINVALID
	}
	return EINTERNAL
}

// KnownCode reports whether code is one of the error codes above.
func KnownCode(code string) bool {
	_, ok := statusByCode[code]
	return ok
}
