//go:build ignore

// gen writes the seccomp-bpf programs of runsc's sandbox (boot) and gofer
// filters into the two filter_precompiled.go files of a writable copy of
// the gVisor module, so that runsc installs a ready program at every
// sandbox start instead of building one from its rules. gVisor's own
// build does this step; `go install` of its Go branch does not, and its
// runsc then spends a share of every start compiling filters.
//
// Run inside the copy of the module, built with the same build tags as
// runsc itself (the rules differ with race, msan and cgo):
//
//	CGO_ENABLED=0 go run gen.go
//
// The programs are the same rules runsc would compile at start; runsc
// looks them up by the key of its options and compiles as before when a
// configuration has no precompiled program.
//
// gVisor precompiles every combination of platform, host networking,
// direct host filesystem and GPU/TPU/RDMA proxies: hundreds of sandbox
// programs, which took most of an hour on a busy 2-core machine. Airlock
// runs runsc on the systrap platform by default, its own network
// stack (--network none or sandbox) and no device proxies, so only the
// sandbox programs of those options are generated (setup.sh adds
// bootsubset.go.in to the copy for that); the gofer's few programs are
// all kept. A sandbox started with other options still works, compiling
// its filters at start as a plain build would.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gvisor.dev/gvisor/pkg/seccomp/precompiledseccomp"
	bootconfig "gvisor.dev/gvisor/runsc/boot/filter/config"
	goferconfig "gvisor.dev/gvisor/runsc/fsgofer/filter/config"
)

func main() {
	targets := []struct {
		file     string
		programs func() ([]precompiledseccomp.Program, error)
	}{
		{"runsc/boot/filter/filter_precompiled.go", func() ([]precompiledseccomp.Program, error) {
			return bootconfig.AirlockPrograms(airlockOptions)
		}},
		{"runsc/fsgofer/filter/filter_precompiled.go", goferconfig.PrecompiledPrograms},
	}
	for _, t := range targets {
		progs, err := t.programs()
		if err != nil {
			fail(err)
		}
		if err := rewrite(t.file, progs); err != nil {
			fail(err)
		}
		fmt.Printf("%s: %d programs\n", t.file, len(progs))
	}
}

// airlockOptions says whether runsc as Airlock runs it can use a sandbox
// filter built for opt: the systrap platform (airlockd's default),
// gVisor's own network stack, any filesystem mode, no device proxies.
func airlockOptions(opt bootconfig.Options) bool {
	return opt.Platform.ConfigKey() == "systrap" &&
		!opt.HostNetwork && !opt.HostNetworkRawSockets &&
		!opt.NVProxy && !opt.TPUProxy && !opt.RDMAProxy
}

// rewrite replaces the empty registerPrograms of file with one that
// registers progs, and marks precompilation as done at build time.
func rewrite(file string, progs []precompiledseccomp.Program) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(src)
	const empty = "\tprograms := make(map[string]precompiledseccomp.Program)\n\tprecompiledPrograms = programs\n"
	if !strings.Contains(s, empty) {
		return fmt.Errorf("%s: registerPrograms is not the empty one this generator knows", file)
	}
	sort.Slice(progs, func(i, j int) bool { return progs[i].Name < progs[j].Name })
	var b strings.Builder
	b.WriteString("\tprograms := make(map[string]precompiledseccomp.Program)\n")
	for _, p := range progs {
		b.WriteString(p.Registration("\t", "precompiledseccomp", "programs"))
	}
	b.WriteString("\tprecompiledPrograms = programs\n")
	s = strings.Replace(s, empty, b.String(), 1)
	s = strings.Replace(s, "const PrecompilationDisabledAtBuildTime = true", "const PrecompilationDisabledAtBuildTime = false", 1)
	return os.WriteFile(filepath.Clean(file), []byte(s), 0o644)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "runsc-seccomp:", err)
	os.Exit(1)
}
