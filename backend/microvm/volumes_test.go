package microvm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// A session placed on a microVM that asks for a volume is refused at
// create with 400 volumes-unsupported-backend (the field is never
// ignored), before a VM is booted or the volume claimed; the volume
// stays free for a session on a backend that mounts it.
func TestVolumesUnsupported(t *testing.T) {
	vm := testenv.MicroVM(t)
	if vm.Capabilities().Volumes {
		t.Fatal("the microvm backend says it mounts volumes; this test checks the refusal")
	}
	st := teststack.New(t, teststack.Options{Extra: []airlock.Backend{vm}, NoServer: true, Pool: provision.PoolConfig{Disabled: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tenant := st.NewTenant(t, "vm").Tenant
	if err := st.Store.SetTenantIsolation(ctx, tenant.ID, airlock.IsolationVM); err != nil {
		t.Fatal(err)
	}
	tenant.Isolation = airlock.IsolationVM
	if _, err := st.Volumes.CreateVolume(ctx, tenant, airlock.CreateVolumeRequest{Name: "data", SizeMiB: 16}); err != nil {
		t.Fatal(err)
	}
	_, _, err := st.Sessions.CreateSession(ctx, tenant, airlock.CreateSessionRequest{Image: "base",
		Volumes: []airlock.VolumeMount{{Name: "data", Path: "/workspace/data"}}}, "")
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Type != "volumes-unsupported-backend" || ae.Code != airlock.EINVALID {
		t.Fatalf("a session with a volume on microvm: %v, want 400 volumes-unsupported-backend", err)
	}
	v, err := st.Volumes.Volume(ctx, tenant, "data")
	if err != nil || len(v.Mounts) != 0 {
		t.Errorf("the volume after the refusal: %+v %v", v, err)
	}
	live, err := st.Store.LiveSessions(ctx)
	if err != nil || len(live) != 0 {
		t.Errorf("live sessions after the refusal: %d %v", len(live), err)
	}
	if err := st.Volumes.DeleteVolume(ctx, tenant, "data"); err != nil {
		t.Fatal(err)
	}
}
