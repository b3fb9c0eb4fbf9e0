package airlock

// The response types with a renamed field send it under both names for
// one release, and read either (the answer of an earlier server); see
// RenamedFields.

func (e Execution) MarshalJSON() ([]byte, error) {
	type plain Execution
	return MarshalWithOldNames("Execution", plain(e))
}

func (e *Execution) UnmarshalJSON(b []byte) error {
	type plain Execution
	return UnmarshalWithOldNames("Execution", b, (*plain)(e))
}

func (a Artifact) MarshalJSON() ([]byte, error) {
	type plain Artifact
	return MarshalWithOldNames("Artifact", plain(a))
}

func (a *Artifact) UnmarshalJSON(b []byte) error {
	type plain Artifact
	return UnmarshalWithOldNames("Artifact", b, (*plain)(a))
}

func (u SessionUsage) MarshalJSON() ([]byte, error) {
	type plain SessionUsage
	return MarshalWithOldNames("SessionUsage", plain(u))
}

func (u *SessionUsage) UnmarshalJSON(b []byte) error {
	type plain SessionUsage
	return UnmarshalWithOldNames("SessionUsage", b, (*plain)(u))
}

func (f FileEntry) MarshalJSON() ([]byte, error) {
	type plain FileEntry
	return MarshalWithOldNames("FileEntry", plain(f))
}

func (f *FileEntry) UnmarshalJSON(b []byte) error {
	type plain FileEntry
	return UnmarshalWithOldNames("FileEntry", b, (*plain)(f))
}

func (p PutFileResult) MarshalJSON() ([]byte, error) {
	type plain PutFileResult
	return MarshalWithOldNames("PutFileResult", plain(p))
}

func (p *PutFileResult) UnmarshalJSON(b []byte) error {
	type plain PutFileResult
	return UnmarshalWithOldNames("PutFileResult", b, (*plain)(p))
}

func (s Snapshot) MarshalJSON() ([]byte, error) {
	type plain Snapshot
	return MarshalWithOldNames("Snapshot", plain(s))
}

func (s *Snapshot) UnmarshalJSON(b []byte) error {
	type plain Snapshot
	return UnmarshalWithOldNames("Snapshot", b, (*plain)(s))
}

func (e EgressEvent) MarshalJSON() ([]byte, error) {
	type plain EgressEvent
	return MarshalWithOldNames("EgressEvent", plain(e))
}

func (e *EgressEvent) UnmarshalJSON(b []byte) error {
	type plain EgressEvent
	return UnmarshalWithOldNames("EgressEvent", b, (*plain)(e))
}

func (e AbuseEvent) MarshalJSON() ([]byte, error) {
	type plain AbuseEvent
	return MarshalWithOldNames("AbuseEvent", plain(e))
}

func (e *AbuseEvent) UnmarshalJSON(b []byte) error {
	type plain AbuseEvent
	return UnmarshalWithOldNames("AbuseEvent", b, (*plain)(e))
}

func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	return MarshalWithOldNames("Usage", plain(u))
}

func (u *Usage) UnmarshalJSON(b []byte) error {
	type plain Usage
	return UnmarshalWithOldNames("Usage", b, (*plain)(u))
}

func (a AuditEntry) MarshalJSON() ([]byte, error) {
	type plain AuditEntry
	return MarshalWithOldNames("AuditEntry", plain(a))
}

func (a *AuditEntry) UnmarshalJSON(b []byte) error {
	type plain AuditEntry
	return UnmarshalWithOldNames("AuditEntry", b, (*plain)(a))
}
