package guard

func (a *analysis) python(src string, at pos, depth int) {}
