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
