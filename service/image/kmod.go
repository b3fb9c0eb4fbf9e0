package image

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kernelModules finds the module files (.ko) named in want under
// modDir (a lib/modules/<release> directory) and returns their paths
// with every dependency first, each once, in the order want names them
// otherwise. Dependencies come from each module's own .modinfo section
// (a kernel package unpacked without depmod has no modules.dep).
func kernelModules(modDir string, want []string) ([]string, error) {
	index := map[string]string{} // module name -> path
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			index[modName(strings.TrimSuffix(d.Name(), ".ko"))] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, from string) error
	visit = func(name, from string) error {
		name = modName(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("kernel modules: dependency cycle at %s", name)
		case 2:
			return nil
		}
		p, ok := index[name]
		if !ok {
			return fmt.Errorf("kernel modules: %s (needed by %s) is not in %s; is it built in?", name, from, modDir)
		}
		state[name] = 1
		deps, err := modDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		out = append(out, p)
		return nil
	}
	for _, w := range want {
		if err := visit(w, "the guest"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// modName normalises a module name: the kernel treats - and _ alike.
func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// modDepends reads the "depends=" entry of a module's .modinfo section.
func modDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("kernel module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
