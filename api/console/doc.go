// Package console is Airlock's web console: a page served at /console/
// that shows a tenant what ran (executions with their phases and
// artifacts, images inline), its sessions (state, limits, usage, the live
// output of what runs in them, files) and the egress log of sessions and
// of networked one-shot runs. It is plain
// HTML, CSS and JavaScript embedded in the binary: no build step.
//
// It owns the page's assets and the headers they are served with (a
// strict Content-Security-Policy: scripts and styles of this origin only,
// no inline script, images only from this origin, blobs and data URLs;
// nothing may frame it). The page signs in with a tenant's API key, kept
// in the tab's session storage, and speaks only the REST API with it, so
// it sees exactly what that key may see.
//
// It must not serve data of its own: everything the page shows comes
// from the REST API, under the key's authentication.
package console
