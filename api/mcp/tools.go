package mcp

import (
	"context"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
)

// tools holds what the tool handlers share.
type tools struct {
	cfg Config
}

func ptr[T any](v T) *T { return &v }

// The descriptions of properties shared by several tools.
var (
	sessionIDProp = prop{desc: "The session_id that create_session returned."}
	timeoutProp   = prop{desc: "Wall-clock limit in seconds; the program is killed when it passes. Omit for the server's default (30 s for run_code, 60 s in a session).", min: minimum(1)}
)

// ToolNames lists the tools in the order they are registered.
var ToolNames = []string{"run_code", "create_session", "exec", "run_cell", "write_file", "read_file", "list_files", "delete_session"}

func (t *tools) register(srv *sdk.Server) {
	closed := ptr(false)
	add(t, srv, &sdk.Tool{
		Name:  "run_code",
		Title: "Run code once",
		Description: "Run a program once in a new, isolated sandbox that is destroyed afterwards, and get its stdout, stderr, exit code and the files it wrote. " +
			"Files written to the working directory come back as artifacts; images among them (PNG, JPEG, GIF, WebP) are returned as image content, " +
			"e.g. a matplotlib chart saved with plt.savefig(\"chart.png\"). Nothing persists between calls: use create_session for work in several steps. " +
			"A non-zero exit code is a result, not a tool error.",
		InputSchema: schemaOf[airlock.ExecuteRequest]("The program to run (the body of POST /v1/execute).", map[string]prop{
			"language":      {desc: "The program's language. python has numpy, pandas and matplotlib (Agg backend) in the default image; sql runs SQLite against ./db.sqlite.", enum: enumOf(airlock.Languages)},
			"code":          {desc: "The program's source code (at most 1 MiB)."},
			"timeout_s":     timeoutProp,
			"allow_network": {desc: "Give the program the tenant's network allow list (set by the operator); refused if the tenant has none. Default: no network at all."},
			"image":         {desc: "Image to run in: python-ds (Python with numpy, pandas, matplotlib) or base (bash, python3, node, sqlite3). Omit for the language's default."},
			"template":      {desc: "A template to run from instead of an image: the tenant's own (made with POST /v1/templates), else the operator's. Not with image."},
			"isolation":     {desc: "Isolation level: kernel (gVisor, the default) or stronger. Omit unless told otherwise; asking for less than the tenant's floor is refused.", enum: enumOf(airlock.Isolations)},
		}),
		OutputSchema: schemaOf[airlock.Execution]("The execution record, as GET /v1/executions/{id} returns it.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Run code once", OpenWorldHint: closed, DestructiveHint: ptr(false)},
	}, t.runCode)

	add(t, srv, &sdk.Tool{
		Name:  "create_session",
		Title: "Create a session",
		Description: "Create a session: one sandbox kept for many calls (exec, run_cell, write_file, read_file, list_files) until its timeout or delete_session. " +
			"Files, installed packages and interpreter state persist between calls. Returns the session_id the other tools take. " +
			"Tenants may hold only a few sessions at once: delete sessions you no longer need.",
		InputSchema: schemaOf[CreateSessionInput]("The session to create (the body of POST /v1/sessions).", map[string]prop{
			"tenant":          {desc: "Leave out: the tenant is the API key's."},
			"image":           {desc: "Image: python-ds (Python with numpy, pandas, matplotlib; the default) or base (bash, python3, node, sqlite3)."},
			"template":        {desc: "A template to start from instead of an image: the tenant's own, else the operator's. Not with image."},
			"size":            {desc: "CPU, memory and disk preset. Default small.", enum: enumOf(airlock.SessionSizes)},
			"timeout_s":       {desc: "Seconds until the session is destroyed (default 600).", min: minimum(1)},
			"idle_timeout_s":  {desc: "Seconds without any call after which the session is destroyed (default 600).", min: minimum(1)},
			"network":         {desc: "Network of the sandbox. Default none."},
			"network.mode":    {desc: "none: no network. allow_list: only the hosts in allow, through the egress proxy.", enum: []any{airlock.NetworkNone, airlock.NetworkAllowList}},
			"network.allow":   {desc: "Hosts the session may reach: \"host\", \"host:port\" or \"*.domain[:port]\"."},
			"broker_scopes":   {desc: "Credential broker scopes the session's code may call (configured by the operator). Usually empty."},
			"isolation":       {desc: "Isolation level, as for run_code. Omit unless told otherwise.", enum: enumOf(airlock.Isolations)},
			"idempotency_key": {desc: "A unique string for this creation: retrying with the same key and input returns the same session instead of a second one."},
			"from_snapshot":   {desc: "Start with the workspace of one of your snapshots (its ID). Usually empty."},
			"lifecycle":       {desc: "What a timeout or an idle timeout does. Omit to end the session."},
			"lifecycle.on_timeout": {desc: "end (the default): the session ends. pause: it is paused (its files and interpreter state kept) instead; needs network none.",
				enum: []any{"end", "pause"}},
			"lifecycle.auto_resume": {desc: "With on_timeout pause: the next call to the paused session resumes it."},
			"volumes":               {desc: "The tenant's volumes to mount (made with POST /v1/volumes). Usually empty."},
			"volumes.name":          {desc: "The volume's name."},
			"volumes.path":          {desc: "Where it is mounted: under /workspace or /tmp, or an existing directory such as /mnt."},
			"volumes.read_only":     {desc: "Mount it read-only (any number of readers beside one writer)."},
		}),
		OutputSchema: schemaOf[airlock.Session]("The session, as GET /v1/sessions/{id} returns it.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Create a session", OpenWorldHint: closed, DestructiveHint: ptr(false)},
	}, t.createSession)

	add(t, srv, &sdk.Tool{
		Name:  "exec",
		Title: "Run a command in a session",
		Description: "Run a command in a session's sandbox and wait for it: give shell (a command line run by bash) or cmd (an argv array). " +
			"The working directory is /workspace, shared with the other session tools. Returns stdout, stderr and the exit code; " +
			"a non-zero exit code is a result, not a tool error.",
		InputSchema: schemaOf[ExecInput]("The command to run (the body of POST /v1/sessions/{id}/exec).", map[string]prop{
			"session_id": sessionIDProp,
			"cmd":        {desc: "The program and its arguments, e.g. [\"python3\", \"script.py\"]. Give cmd or shell, not both."},
			"shell":      {desc: "A command line for bash, e.g. \"pip list | head\". Give cmd or shell, not both."},
			"env":        {desc: "Extra environment variables."},
			"cwd":        {desc: "Working directory, relative to /workspace or absolute under /workspace or /tmp."},
			"stdin":      {desc: "Text fed to the command's standard input."},
			"timeout_s":  timeoutProp,
		}),
		OutputSchema: schemaOf[airlock.Execution]("The execution record of the command.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Run a command in a session", OpenWorldHint: closed},
	}, t.exec)

	add(t, srv, &sdk.Tool{
		Name:  "run_cell",
		Title: "Run a notebook cell",
		Description: "Run code in a persistent interpreter of a session, like a notebook cell: variables, imports and open files survive between cells. " +
			"The value of the last expression comes back as text, every matplotlib figure the cell made as image content (no savefig needed), " +
			"and an exception as error (name, value, traceback). Without context_id the session's interpreter for the language is used, started on first use.",
		InputSchema: schemaOf[RunCellInput]("The cell to run (the body of POST /v1/sessions/{id}/contexts/{cid}/run).", map[string]prop{
			"session_id": sessionIDProp,
			"context_id": {desc: "A context_id from an earlier run_cell, to pick one interpreter among several. Usually omitted."},
			"language":   {desc: "Interpreter language when context_id is omitted. Default python.", enum: enumOf(airlock.ContextLanguages)},
			"code":       {desc: "The cell's code."},
			"timeout_s":  {desc: "Limit in seconds; past it the cell is interrupted (KeyboardInterrupt) and the interpreter lives on. Omit for the default (60 s).", min: minimum(1)},
		}),
		OutputSchema: schemaOf[airlock.CellResult]("What the cell did. Images are returned as image content: the data of image/png outputs is left empty here.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Run a notebook cell", OpenWorldHint: closed},
	}, t.runCell)

	add(t, srv, &sdk.Tool{
		Name:        "write_file",
		Title:       "Write a file in a session",
		Description: "Create or replace a file in a session's sandbox. The file is replaced as a whole; missing parent directories are an error.",
		InputSchema: schemaOf[WriteFileInput]("The file to write (PUT /v1/sessions/{id}/files).", map[string]prop{
			"session_id": sessionIDProp,
			"path":       {desc: "Path relative to /workspace (e.g. data.csv), or absolute under /workspace or /tmp."},
			"content":    {desc: "The file's content (at most 4 MiB once decoded)."},
			"encoding":   {desc: "How content is encoded: utf-8 (text, the default) or base64 (binary).", enum: []any{EncodingUTF8, EncodingBase64}},
		}),
		OutputSchema: schemaOf[airlock.PutFileResult]("The file written.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Write a file in a session", OpenWorldHint: closed, IdempotentHint: true},
	}, t.writeFile)

	add(t, srv, &sdk.Tool{
		Name:        "read_file",
		Title:       "Read a file in a session",
		Description: "Read a file of a session's sandbox: text comes back as text, images (PNG, JPEG, GIF, WebP) as image content, other bytes as base64.",
		InputSchema: schemaOf[ReadFileInput]("The file to read (GET /v1/sessions/{id}/files).", map[string]prop{
			"session_id": sessionIDProp,
			"path":       {desc: "Path relative to /workspace, or absolute under /workspace or /tmp."},
			"max_bytes":  {desc: "Read at most this many bytes (default 262144, at most 4194304); a longer file is cut and marked truncated.", min: minimum(1)},
		}),
		OutputSchema: schemaOf[ReadFileOutput]("What was read.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Read a file in a session", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closed},
	}, t.readFile)

	add(t, srv, &sdk.Tool{
		Name:        "list_files",
		Title:       "List files in a session",
		Description: "List a directory of a session's sandbox: name, type, size, mode and modification time of each entry.",
		InputSchema: schemaOf[ListFilesInput]("The directory to list (GET /v1/sessions/{id}/files?list=1).", map[string]prop{
			"session_id": sessionIDProp,
			"path":       {desc: "Directory relative to /workspace, or absolute under /workspace or /tmp. Default: /workspace."},
		}),
		OutputSchema: schemaOf[airlock.FileList]("The directory's entries.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "List files in a session", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closed},
	}, t.listFiles)

	add(t, srv, &sdk.Tool{
		Name:        "delete_session",
		Title:       "Delete a session",
		Description: "Destroy a session and its sandbox, with every file and interpreter in it. Returns the session's final record.",
		InputSchema: schemaOf[SessionInput]("The session to destroy (DELETE /v1/sessions/{id}).", map[string]prop{
			"session_id": sessionIDProp,
		}),
		OutputSchema: schemaOf[airlock.Session]("The session's final record.", nil),
		Annotations:  &sdk.ToolAnnotations{Title: "Delete a session", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: closed},
	}, t.deleteSession)
}

// toolFunc is a tool's implementation: it gets the caller's API client.
type toolFunc[In, Out any] func(ctx context.Context, api API, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error)

// add registers a tool whose handler gets the caller's client, logs the
// call and turns API errors into tool errors.
func add[In, Out any](t *tools, srv *sdk.Server, tool *sdk.Tool, h toolFunc[In, Out]) {
	sdk.AddTool(srv, tool, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		start := time.Now()
		var zero Out
		api, err := t.cfg.Client(ctx, req)
		if err != nil {
			return nil, zero, toolError(err)
		}
		res, out, err := h(ctx, api, req, in)
		if err != nil {
			err = toolError(err)
		}
		level, attrs := slog.LevelInfo, []slog.Attr{slog.String("tool", tool.Name), slog.Duration("duration", time.Since(start))}
		if err != nil {
			level, attrs = slog.LevelWarn, append(attrs, slog.String("error", err.Error()))
		}
		t.cfg.Logger.LogAttrs(ctx, level, "mcp tool call", attrs...)
		return res, out, err
	})
}
