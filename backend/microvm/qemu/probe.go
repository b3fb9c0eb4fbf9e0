package qemu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/backend/microvm/vmm"
)

// ProbeTimeout bounds the KVM probe boot: under KVM the kernel prints its
// banner within a fraction of a second.
const ProbeTimeout = 3 * time.Second

// Probe tells whether KVM can boot kernel here: it boots it under
// -accel kvm with no initramfs for at most ProbeTimeout and looks for the
// kernel's banner on the serial console. A host without /dev/kvm, or one
// whose KVM boots only special guest kernels (a paravirtualised host),
// gets TCG. The reason is returned for the log.
func Probe(ctx context.Context, qemuPath, kernel string) (vmm.Accel, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return vmm.AccelTCG, "no usable /dev/kvm: " + err.Error()
	}
	f.Close()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemuPath, "-M", "microvm,isa-serial=on", "-accel", "kvm", "-cpu", "host",
		"-m", "64", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", kernel, "-append", "console=ttyS0 panic=-1 earlyprintk=ttyS0", "-serial", "stdio")
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		return vmm.AccelTCG, "kvm probe: " + err.Error()
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if strings.Contains(out.String(), "Linux version") {
			cmd.Process.Kill()
			<-done
			return vmm.AccelKVM, "a probe boot under KVM printed the kernel banner"
		}
		select {
		case <-done:
			msg := lastLine(errOut.String())
			if msg == "" {
				msg = lastLine(out.String())
			}
			return vmm.AccelTCG, fmt.Sprintf("a probe boot under KVM ended (%v) without the kernel banner: %q", cmd.ProcessState, msg)
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			return vmm.AccelTCG, "a probe boot under KVM printed no kernel banner in " + ProbeTimeout.String() + " (a paravirtualised KVM?): " + lastLine(errOut.String())
		case <-tick.C:
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.TrimSpace(s)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
