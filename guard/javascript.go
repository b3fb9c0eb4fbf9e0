package guard

func (a *analysis) javascript(src string, at pos, depth int) {}
