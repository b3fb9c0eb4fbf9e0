package rest

import (
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// Volumes (airlock.VolumeService).

// volumes returns the volume service, or answers 501 when the server has
// none.
func (s *Server) volumes(w http.ResponseWriter, r *http.Request) (airlock.VolumeService, bool) {
	if s.cfg.Volumes == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "volumes-disabled", "volumes are not enabled on this server"))
		return nil, false
	}
	return s.cfg.Volumes, true
}

// VolumeList is the body of GET /v1/volumes.
type VolumeList struct {
	Volumes []*airlock.Volume `json:"volumes"`
}

// createVolume makes a volume: POST /v1/volumes. 201 with the volume.
func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	var req airlock.CreateVolumeRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	v, err := vs.CreateVolume(r.Context(), TenantFrom(r.Context()), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/volumes/"+url.PathEscape(v.Name))
	s.writeJSON(w, r, http.StatusCreated, v)
}

// listVolumes lists the tenant's volumes by name: GET /v1/volumes.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	list, err := vs.ListVolumes(r.Context(), TenantFrom(r.Context()))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, VolumeList{Volumes: list})
}

// getVolume shows one volume and its mounts: GET /v1/volumes/{name}.
func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	v, err := vs.Volume(r.Context(), TenantFrom(r.Context()), r.PathValue("name"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}

// deleteVolume removes a volume and its data: DELETE /v1/volumes/{name}.
// 204; 409 volume-in-use while a session has it mounted.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	if err := vs.DeleteVolume(r.Context(), TenantFrom(r.Context()), r.PathValue("name")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createVolumeSnapshot seals a copy of a volume's files: POST
// /v1/volumes/{name}/snapshots, with an optional body {"name"}. 201 with
// the snapshot; 409 volume-busy while a session writes the volume.
func (s *Server) createVolumeSnapshot(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	var req airlock.CreateVolumeSnapshotRequest
	if !s.decodeOptional(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	snap, err := vs.CreateVolumeSnapshot(r.Context(), TenantFrom(r.Context()), name, req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/volumes/"+url.PathEscape(name)+"/snapshots/"+url.PathEscape(snap.ID))
	s.writeJSON(w, r, http.StatusCreated, snap)
}

// listVolumeSnapshots lists a volume's snapshots, newest first: GET
// /v1/volumes/{name}/snapshots.
func (s *Server) listVolumeSnapshots(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	list, err := vs.ListVolumeSnapshots(r.Context(), TenantFrom(r.Context()), r.PathValue("name"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, airlock.VolumeSnapshotList{Snapshots: list})
}

// deleteVolumeSnapshot deletes one of a volume's snapshots and its data:
// DELETE /v1/volumes/{name}/snapshots/{snapshot_id}. 204.
func (s *Server) deleteVolumeSnapshot(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.volumes(w, r)
	if !ok {
		return
	}
	if err := vs.DeleteVolumeSnapshot(r.Context(), TenantFrom(r.Context()), r.PathValue("name"), r.PathValue("snapshot_id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
