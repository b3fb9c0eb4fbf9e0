package dockerfile

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxIDFileBytes bounds the /etc/passwd and /etc/group read from a
// rootfs the build's own steps wrote.
const maxIDFileBytes = 4 << 20

// lookupUser resolves a USER value ("name", "uid", "name:group",
// "uid:gid") against /etc/passwd and /etc/group of the rootfs, read
// without leaving it. A numeric user needs no entry; its group is then
// the passwd entry's, or the uid itself.
func lookupUser(root *os.Root, spec string) (uid, gid uint32, err error) {
	if spec == "" || spec == "root" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(spec, ":")
	passwd := readIDFile(root, "etc/passwd")
	found := false
	if n, perr := strconv.ParseUint(u, 10, 32); perr == nil {
		uid, gid = uint32(n), uint32(n)
		for _, f := range passwd {
			if len(f) >= 4 && f[2] == u {
				if n, perr := strconv.ParseUint(f[3], 10, 32); perr == nil {
					gid = uint32(n)
				}
			}
		}
		found = true
	} else {
		for _, f := range passwd {
			if len(f) >= 4 && f[0] == u {
				un, err1 := strconv.ParseUint(f[2], 10, 32)
				gn, err2 := strconv.ParseUint(f[3], 10, 32)
				if err1 != nil || err2 != nil {
					return 0, 0, fmt.Errorf("user %q has a bad /etc/passwd entry", u)
				}
				uid, gid, found = uint32(un), uint32(gn), true
				break
			}
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("unable to find user %s: no matching entries in passwd file", u)
	}
	if !hasGroup {
		return uid, gid, nil
	}
	if n, perr := strconv.ParseUint(g, 10, 32); perr == nil {
		return uid, uint32(n), nil
	}
	for _, f := range readIDFile(root, "etc/group") {
		if len(f) >= 3 && f[0] == g {
			n, perr := strconv.ParseUint(f[2], 10, 32)
			if perr != nil {
				return 0, 0, fmt.Errorf("group %q has a bad /etc/group entry", g)
			}
			return uid, uint32(n), nil
		}
	}
	return 0, 0, fmt.Errorf("unable to find group %s: no matching entries in group file", g)
}

// readIDFile returns the colon-separated fields of each line of a file
// in root, or nothing when it is missing or not a regular file.
func readIDFile(root *os.Root, name string) [][]string {
	f, err := root.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIDFileBytes {
		return nil
	}
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}
