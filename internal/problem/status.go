package problem

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// statusByCode is the one table from error code to HTTP status. Servers
// answer with it; clients map statuses back with it.
var statusByCode = map[string]int{
	airlock.EINVALID:        http.StatusBadRequest,
	airlock.EUNAUTHORIZED:   http.StatusUnauthorized,
	airlock.EFORBIDDEN:      http.StatusForbidden,
	airlock.ENOTFOUND:       http.StatusNotFound,
	airlock.ECONFLICT:       http.StatusConflict,
	airlock.ETOOLARGE:       http.StatusRequestEntityTooLarge,
	airlock.ERATELIMITED:    http.StatusTooManyRequests,
	airlock.EUNPROCESSABLE:  http.StatusUnprocessableEntity,
	airlock.EUNAVAILABLE:    http.StatusServiceUnavailable,
	airlock.ENOTIMPLEMENTED: http.StatusNotImplemented,
	airlock.EINTERNAL:       http.StatusInternalServerError,
}

// Status returns the HTTP status of an error code; 500 for a code it
// does not know.
func Status(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeFor maps an HTTP status back to an error code, for error responses
// that carry none (a proxy's 502, say): the table's reverse, 502 and 504
// as unavailable, another 4xx as invalid and anything else as internal.
func CodeFor(status int) string {
	for code, s := range statusByCode {
		if s == status {
			return code
		}
	}
	switch {
	case status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return airlock.EUNAVAILABLE
	case status >= 400 && status < 500:
		return airlock.EINVALID
	}
	return airlock.EINTERNAL
}
