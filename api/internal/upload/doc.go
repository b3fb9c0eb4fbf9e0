// Package upload keeps the request bodies that the front ends stream
// into sandboxes (REST file uploads, E2B's /files) moving: a body must
// deliver a minimum number of bytes in every window of time, or its
// reads fail with a problem saying so, so that a client that opens an
// upload and then trickles (a slow-loris) cannot hold a connection, a
// handler and a session's upload slot for ever.
//
// It owns only the wrapping of one request's body and its read deadline;
// it knows nothing of sessions or sandboxes.
package upload
