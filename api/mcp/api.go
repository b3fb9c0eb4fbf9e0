package mcp

import (
	"context"
	"io"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// API is what the tools call: the REST API, as *client.Client speaks it.
type API interface {
	Execute(ctx context.Context, req airlock.ExecuteRequest, opts ...client.ExecuteOption) (*airlock.Execution, error)
	DownloadArtifact(ctx context.Context, a airlock.Artifact, w io.Writer) (int64, error)
	CreateSession(ctx context.Context, req airlock.CreateSessionRequest, opts ...client.SessionOption) (*airlock.Session, bool, error)
	DeleteSession(ctx context.Context, id string) (*airlock.Session, error)
	Exec(ctx context.Context, id string, req airlock.SessionExecRequest) (*airlock.Execution, error)
	CreateContext(ctx context.Context, id string, language airlock.ContextLanguage) (*airlock.CodeContext, error)
	ListContexts(ctx context.Context, id string) ([]*airlock.CodeContext, error)
	RunCell(ctx context.Context, id, cid string, req airlock.RunCellRequest) (*airlock.CellResult, error)
	PutFile(ctx context.Context, id, path string, r io.Reader, size int64) (*airlock.PutFileResult, error)
	GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error)
	ListFiles(ctx context.Context, id, path string) (*airlock.FileList, error)
}

var _ API = (*client.Client)(nil)
