package gvisor

// DirectRecordRemovals is how many destroys removed runsc's record
// themselves, without `runsc delete`.
func DirectRecordRemovals() int64 { return directRemovals.Load() }
