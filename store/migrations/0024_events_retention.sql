-- Events and webhook deliveries are kept for a bounded time
-- (--events-retention): these let the pruner find the old ones without
-- reading every row.
CREATE INDEX events_at ON events (at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
