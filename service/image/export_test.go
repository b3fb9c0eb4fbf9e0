package image

import "github.com/airlockhq/airlock"

// StageHashWith is StageHash with the parents looked up among parents
// instead of the shipped specs.
func StageHashWith(spec airlock.ImageSpec, parents ...airlock.ImageSpec) string {
	lookup := func(name string) (airlock.ImageSpec, bool) {
		for _, p := range parents {
			if p.Name == name {
				return p, true
			}
		}
		return airlock.ImageSpec{}, false
	}
	return stageHash(spec, lookup, map[string]bool{})
}
