package fleet

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Affinity: where a request must or should run, by what it names. A
// request from a template prefers the nodes that hold the template
// (placement's score); a request that mounts a volume runs only on the
// volume's node, and so does a volume's deletion (its disk is there).

// ProblemVolumeUnavailable is the problem type of a request that mounts a
// volume whose node is not a live member of the fleet (or cannot take
// the request): it runs only there.
const ProblemVolumeUnavailable = "volume-unavailable"

// Affinity reads, in the shared store, what a request's names mean for
// its placement: the ID of the template it starts from and the node that
// holds a volume it mounts. A name that resolves to nothing is left
// empty (the node the request reaches answers for it).
type Affinity interface {
	// Template returns the ID of the tenant's template (else the
	// operator's) of that name, or "".
	Template(ctx context.Context, tenantID, name string) (string, error)
	// VolumeNode returns the node that holds the tenant's volume of that
	// name ("" when there is none, or it is held by no node).
	VolumeNode(ctx context.Context, tenantID, name string) (string, error)
}

// affinity resolves the template and the volumes a request names (for
// its tenant) into req: the template's ID, and the node holding the first
// volume that is held by one. A name that resolves to nothing is left to
// the node that serves the request to answer for.
func (f *Fleet) affinity(ctx context.Context, tenant string, pb placeBody, req *Request) error {
	a := f.cfg.Affinity
	if a == nil || tenant == "" {
		return nil
	}
	name := pb.Template
	if name == "" {
		name = pb.TemplateID // E2B's names a template or an image
	}
	if name != "" {
		id, err := a.Template(ctx, tenant, name)
		if err != nil {
			f.log.Debug("fleet: resolving a request's template", "err", err)
		}
		req.Template = id
	}
	for _, v := range pb.Volumes {
		if v.Name == "" {
			continue
		}
		node, err := a.VolumeNode(ctx, tenant, v.Name)
		if err != nil {
			if airlock.ErrorCode(err) == airlock.ENOTFOUND {
				continue
			}
			f.log.Warn("fleet: reading which node holds a volume", "err", err)
			return airlock.Problem(airlock.EUNAVAILABLE, "unavailable", "the request's volumes could not be looked up now").RetryLater(time.Second)
		}
		if node != "" {
			req.Volume, req.VolumeNode = v.Name, node
			return nil
		}
	}
	return nil
}

// volumeDeleted returns the volume a DELETE /v1/volumes/{name} names, or
// "".
func volumeDeleted(r *http.Request) string {
	name, ok := strings.CutPrefix(r.URL.Path, "/v1/volumes/")
	if r.Method != http.MethodDelete || !ok || name == "" || strings.Contains(name, "/") {
		return ""
	}
	return name
}

// serveVolume sends the deletion of a volume to the node that holds its
// disk (which removes it there); while that node is not a live member
// the deletion is refused, so no disk is left behind unrecorded.
func (f *Fleet) serveVolume(w http.ResponseWriter, r *http.Request, local http.Handler, tenant, name string) {
	var node string
	if f.cfg.Affinity != nil {
		var err error
		node, err = f.cfg.Affinity.VolumeNode(r.Context(), tenant, name)
		if err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
			f.log.Warn("fleet: reading which node holds a volume", "err", err)
			f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, "unavailable", "the volume could not be looked up now").RetryLater(time.Second))
			return
		}
	}
	if node == "" || node == f.cfg.NodeID {
		f.serveLocal(w, r, local, "", false)
		return
	}
	n, ok := f.member(node)
	if !ok {
		f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, ProblemVolumeUnavailable,
			"volume %s is held by node %s, which is not a live member of the fleet now", name, node).With("node", node).RetryLater(10*time.Second))
		return
	}
	if status, _, err := f.forward(w, r, n, ""); err != nil && status == 0 {
		f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, ProblemVolumeUnavailable,
			"the node holding volume %s (%s) cannot be reached now", name, node).With("node", node).RetryLater(2*time.Second))
	}
}
