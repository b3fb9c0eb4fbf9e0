package main

import (
	"context"
)

const rootUsage = `airlock runs code in fresh sandboxes on an Airlock server, and administers
Airlock: client commands talk to a server with a tenant's key (set one up
with 'airlock login'), 'airlock admin' with an operator key over the admin
API, and 'airlock node' works on this host's own state directory.
`

const nodeUsage = `airlock node works on this host: its state directory, images, store and
master key, and the benchmarks that run beside airlockd. Most need root
(or the user that owns the state directory).
`

// Sections of the top-level help.
const (
	secStart   = "getting started"
	secRun     = "running code"
	secRecords = "records"
	secOps     = "operators"
	secOther   = "other"
)

// tree returns the command tree. Old spellings are hidden commands with
// moved set: they work for one more release and say what replaces them.
func tree() *command {
	image := &command{name: "image", summary: "build, list, scan and prune sandbox images", usage: imageUsage + "\n",
		run: runImage, words: []string{"build", "ls", "scan", "prune"}}
	masterKey := &command{name: "master-key", summary: "generate, identify and rotate the master key that wraps snapshot keys", usage: masterKeyUsage,
		run: runMasterKey, words: []string{"generate", "id", "rotate"}}
	tenant := &command{name: "tenant", summary: "deprecated: tenants in this node's store (use 'airlock admin tenant')", usage: tenantUsage,
		run: runTenant, words: []string{"create", "set", "ls", "usage", "quarantine", "unquarantine"}}
	key := &command{name: "key", summary: "deprecated: create a key in this node's store (use 'airlock admin key')", usage: keyUsage,
		run: runKey, words: []string{"create"}}
	nodeEvents := &command{name: "events", summary: "abuse events of this node's store, every tenant's", usage: eventsUsage, run: runEvents}
	bench := &command{name: "bench", summary: "load-test this machine's server", usage: benchUsage, run: runBench}
	benchBackends := &command{name: "bench-backends", summary: "time create-run-destroy on each backend beside bwrap and the bare process", usage: benchBackendsUsage, run: runBenchBackends}
	baseline := &command{name: "baseline", summary: "time the same code outside Airlock (bare runsc run, or chroot)", usage: baselineUsage, run: runBaseline}
	node := &command{name: "node", section: secOps, summary: "this host's images, master key, store and benchmarks", usage: nodeUsage,
		subs: []*command{image, masterKey, tenant, key, nodeEvents, bench, benchBackends, baseline}}

	root := &command{name: "airlock", usage: rootUsage, subs: []*command{
		{name: "login", section: secStart, summary: "check a server URL and key and store them as a profile", usage: loginUsage, run: runLogin},
		{name: "logout", section: secStart, summary: "remove a profile and its keys from this machine", usage: logoutUsage, run: runLogout},
		{name: "profile", section: secStart, summary: "list, show, select and remove profiles", usage: profileUsage, run: runProfile, words: []string{"ls", "show", "use", "rm"}},

		{name: "run", section: secRun, summary: "run a file once in a fresh sandbox and print its output", usage: runUsage, run: runRun},
		{name: "session", section: secRun, summary: "create, list, show, extend, pause, fork and remove sessions, and make templates of them", usage: sessionUsage, run: runSession,
			words: []string{"create", "ls", "show", "extend", "rm", "pause", "resume", "fork", "template"}},
		{name: "exec", section: secRun, summary: "run a command in a session, streaming its output", usage: execUsage, run: runExec},
		{name: "shell", section: secRun, summary: "an interactive terminal in a session", usage: shellUsage, run: runShell},
		{name: "cp", section: secRun, summary: "copy a file into or out of a session", usage: cpUsage, run: runCp},
		{name: "repl", section: secRun, summary: "a persistent Python or Node context of a session at the terminal", usage: replUsage, run: runRepl},
		{name: "snapshot", section: secRun, summary: "create, list, show and remove sealed session snapshots", usage: snapshotUsage, run: runSnapshot,
			words: []string{"create", "ls", "show", "rm"}},
		{name: "template", section: secRun, summary: "build, import, list, show and remove templates (images a tenant brings)", usage: templateUsage, run: runTemplate,
			words: []string{"build", "import", "ls", "show", "logs", "rm"}},
		{name: "volume", aliases: []string{"volumes"}, section: secRun, summary: "create, list, show and remove named volumes that outlive sessions, and their snapshots", usage: volumeUsage, run: runVolume,
			words: []string{"create", "ls", "show", "rm", "snapshot"}},

		{name: "executions", aliases: []string{"execution"}, section: secRecords, summary: "list and show the tenant's executions", usage: executionsUsage, run: runExecutions, words: []string{"ls", "show"}},
		{name: "usage", section: secRecords, summary: "the tenant's use of its quotas", usage: quotaUsageUsage, run: runQuotaUsage},
		{name: "events", section: secRecords, summary: "the tenant's session and abuse events (--follow to wait for more)", usage: clientEventsUsage, run: runClientEvents},
		{name: "webhook", aliases: []string{"webhooks"}, section: secRecords, summary: "create, list and remove the tenant's webhooks (signed event deliveries)", usage: webhookUsage, run: runWebhook,
			words: []string{"create", "ls", "rm", "deliveries"}},
		{name: "keys", section: secRecords, summary: "list, create and revoke the tenant's own API keys", usage: keysUsage, run: runKeys, words: []string{"ls", "create", "revoke"}},

		{name: "admin", section: secOps, summary: "tenants, keys, quotas, usage, events and audit over the admin API", usage: adminUsage, run: runAdmin,
			words: []string{"tenant", "key", "usage", "events", "audit"}},
		node,

		{name: "mcp", section: secOther, summary: "serve Airlock's tools to an MCP client over stdio", usage: mcpUsage, run: runMCP},
		{name: "completion", section: secOther, summary: "print a shell completion script (bash, zsh or fish)", usage: completionUsage, run: nil, words: []string{"bash", "zsh", "fish"}},
		{name: "version", section: secOther, summary: "print the version of this build", usage: versionUsage, run: runVersion},
		{name: completeCommand, hidden: true, usage: "", run: nil},
	}}
	// Completion needs the tree itself.
	root.sub("completion").run = func(ctx context.Context, args []string, std stdio) error { return runCompletion(args, std) }
	root.sub(completeCommand).run = func(ctx context.Context, args []string, std stdio) error { return runComplete(root, args, std) }

	// The old spellings of the node's commands.
	for _, c := range []*command{image, masterKey, tenant, key, bench, benchBackends, baseline} {
		old := *c
		old.hidden, old.moved, old.section = true, "node "+c.name, ""
		if c == tenant || c == key {
			old.moved = "" // they say themselves that 'airlock admin' replaces them
		}
		root.subs = append(root.subs, &old)
	}
	return root
}
