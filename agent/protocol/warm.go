package protocol

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// Runtimes that can be prepared warm: an interpreter started, the image's
// common modules imported, waiting for the path of the code to run. A
// sandbox is checkpointed in that state and restored per request.
//
// Only Python: Node keeps its random generator (OpenSSL's DRBG, which also
// feeds crypto.randomUUID and randomBytes) in process memory with no way
// to reseed it from JavaScript, so clones of a warm Node would share it.
const RuntimePython = "python"

// PrepareRequest is the domain's; see messages.go.
type PrepareRequest = airlock.PrepareRequest

// validatePrepare checks a prepare request.
func validatePrepare(p *PrepareRequest) error {
	if p.Runtime != RuntimePython {
		return fmt.Errorf("unknown runtime %q", p.Runtime)
	}
	if len(p.Preload) > 64 || len(p.Env) > MaxArgs {
		return fmt.Errorf("too many preloads or environment entries")
	}
	for _, m := range p.Preload {
		if m == "" || len(m) > MaxNameBytes {
			return fmt.Errorf("bad module name")
		}
		for _, c := range m {
			if !(c == '.' || c == '_' || c == '-' || c == '/' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return fmt.Errorf("bad module name %q", m)
			}
		}
	}
	return nil
}

// Prepare starts a warm runtime and returns once it is waiting for code.
func (c *Client) Prepare(ctx context.Context, req PrepareRequest) error {
	if err := validatePrepare(&req); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	_, err := c.roundTrip(ctx, Request{Op: OpPrepare, Prepare: &req})
	return err
}
