-- Samples of a session's resource use, taken on the host every few
-- seconds while it lives and kept for a day after it ends (the sampler
-- deletes older ones). CPU is in hundredths of a percent of the session's
-- CPU limit; the network counters are totals since the sandbox started.
CREATE TABLE session_samples (
	tenant_id    TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id   TEXT   NOT NULL,
	at           BIGINT NOT NULL,
	cpu_centipct BIGINT NOT NULL,
	memory_bytes BIGINT NOT NULL,
	disk_bytes   BIGINT NOT NULL,
	net_rx_bytes BIGINT NOT NULL,
	net_tx_bytes BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, session_id, at)
);
CREATE INDEX session_samples_at ON session_samples (at);
