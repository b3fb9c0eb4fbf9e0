// Package broker is the credential broker: sandbox code calls
// http://broker.airlock.internal/<scope>/<path> (the egress proxy hands
// such requests to it, with the caller the node knows), and the broker
// checks that the sandbox holds the scope and that the method and path fit
// it, makes the call upstream with the scope's credential, and returns the
// response with every credential-bearing header removed and any copy of
// the credential in the body redacted, in any of the encodings an
// upstream might echo it in (redact.go). The credential never enters the
// sandbox. Every call, allowed or not, is recorded in the egress audit
// log.
//
// Scopes are operator configuration (a JSON file, see FileConfig); the
// credential comes from a file (read at each call, so it can be rotated;
// it must not be readable by group or others) or from airlockd's
// environment. The package must not know sessions, the proxy or the
// network plumbing.
package broker
