// Package webhook delivers a tenant's events to the URLs it registered:
// registration (each webhook gets a signing secret, shown once and kept
// sealed under the tenant's data key), signing (Airlock-Signature:
// t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">), and a dispatcher that
// works the delivery queue the store keeps (RecordEvent queues one row
// per event and webhook): it claims due rows under a lease (one node of
// a fleet sends each try), posts them through a dialer that resolves the
// host and connects only to the address it checked against the egress
// rules (no private, loopback or link-local range unless the operator
// permits private addresses; never the metadata address), and retries
// with back-off until the delivery is a day old.
//
// It owns the webhooks' secrets and the delivery attempts; it must not
// touch sessions, sandboxes or the event feed itself.
package webhook
