// Package console is Airlock's web console: a page served at /console/
// where a tenant sees what ran and acts on it. Executions (phases, output,
// artifacts with images inline); sessions (create with the options of
// POST /v1/sessions, pause, resume, snapshot, fork, end; a session's page
// runs code in cells, uploads, downloads and deletes files, and streams
// the live output of whatever runs in it); snapshots (restore into a new
// session, delete); templates (build from a Dockerfile with an uploaded
// context, import from an image reference, the build log streamed,
// start a session, delete); volumes (create, who has one mounted,
// delete); the tenant's API keys (create, with the secret shown once,
// and revoke); its usage of each quota; its event feed (newest first,
// by session, older pages on demand) and abuse events; its webhooks
// (create, with the signing secret shown once, delete, the delivery log
// and replay); and the egress log of sessions and networked one-shot
// runs. It is plain HTML, CSS and JavaScript embedded in the binary: no
// build step.
//
// It owns the page's assets and the headers they are served with (a
// strict Content-Security-Policy: scripts and styles of this origin only,
// no inline script or eval, Trusted Types with no policy so no string
// becomes HTML, images only from this origin, blobs and data URLs;
// nothing may frame it). The page signs in with a tenant's API key, kept
// in the tab's session storage (never in a URL or local storage), and
// speaks only the public REST API with it, so it sees and does exactly
// what that key may.
//
// It must not serve data of its own or add routes: everything the page
// shows or changes goes through the REST API, under the key's
// authentication.
package console
