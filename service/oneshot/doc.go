// Package oneshot serves one-shot executions (POST /v1/execute): it
// validates a request, admits it and gets its sandbox from the node's
// provisioner (package provision: backend within the tenant's isolation
// floor, pool, snapshot or boot, network), hands the code in and runs it
// through package run (deadline, kill, caps, the record), collects the
// files the code made once the sandbox is stopped, and releases the
// sandbox, which is destroyed after the response.
//
// It is a thin front-end: everything about getting, running and ending a
// sandbox lives in provision and run, which sessions use too. It must
// not know which backend or store it drives.
package oneshot
