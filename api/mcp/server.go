package mcp

import (
	"context"
	"log/slog"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
)

// Config configures NewServer.
type Config struct {
	// Client returns the API client that makes the calls of one tool
	// call, authenticated as its caller. Required.
	Client func(ctx context.Context, req *sdk.CallToolRequest) (API, error)
	// Version is the server's version as reported to clients; "dev" if
	// empty.
	Version string
	// Logger logs one line per tool call; slog.Default() if nil.
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Client == nil {
		return airlock.Errorf(airlock.EINVALID, "mcp: a client function is required")
	}
	return nil
}

// instructions tell the model what the server is for and how its tools
// fit together.
const instructions = `Airlock runs code in fresh, isolated sandboxes (a separate kernel per sandbox) and destroys them afterwards.

- run_code: one program in a new sandbox (python, bash, node or sql). Files it writes in its working directory come back as artifacts; images (a matplotlib figure saved with plt.savefig("chart.png")) come back as image content.
- For work in several steps, create_session once and pass its session_id to exec (shell commands), run_cell (a persistent Python or Node interpreter: variables survive between cells, figures come back as images), write_file, read_file and list_files. Call delete_session when done; sessions also end at their timeout.
- Sandboxes have no network unless the operator configured an allow list. A program's non-zero exit code is a result to read, not a failure of the tool; tool errors name the problem and, for a full node or a quota, when to retry.`

// NewServer returns an MCP server with Airlock's tools.
func NewServer(cfg Config) (*sdk.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "airlock", Title: "Airlock code sandbox", Version: cfg.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: quiet(cfg.Logger)})
	t := &tools{cfg: cfg}
	t.register(srv)
	return srv, nil
}

// agentID names the caller in the execution records (X-Agent-Id): "mcp",
// and the client's name when it gave one at initialization.
func agentID(req *sdk.CallToolRequest) string {
	id := "mcp"
	if req == nil || req.Session == nil {
		return id
	}
	p := req.Session.InitializeParams()
	if p == nil || p.ClientInfo == nil || p.ClientInfo.Name == "" {
		return id
	}
	name := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, p.ClientInfo.Name)
	if len(name) > 100 {
		name = name[:100]
	}
	if name == "" {
		return id
	}
	return id + "/" + name
}

// quiet passes on the SDK's warnings and errors only: at info it logs
// every connection, which over stateless HTTP is every request.
func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
