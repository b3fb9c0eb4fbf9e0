package guard

func (a *analysis) sql(src string) {}
