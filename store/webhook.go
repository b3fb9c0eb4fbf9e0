package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var _ airlock.WebhookStore = (*DB)(nil)

func webhookNotFound(id string) error {
	return airlock.Problem(airlock.ENOTFOUND, "webhook-not-found", "no webhook %s", clip(id))
}

func deliveryNotFound(id string) error {
	return airlock.Problem(airlock.ENOTFOUND, "delivery-not-found", "no delivery %s", clip(id))
}

// eventsText is the stored form of a webhook's event types: ",a,b," or
// empty for every type.
func eventsText(types []string) string {
	if len(types) == 0 {
		return ""
	}
	return "," + strings.Join(types, ",") + ","
}

func eventsOf(text string) []string {
	t := strings.Trim(text, ",")
	if t == "" {
		return []string{}
	}
	return strings.Split(t, ",")
}

// CreateWebhook records w. An empty ID gets a new ULID and a zero
// CreatedAt the clock's time; both are written back.
func (db *DB) CreateWebhook(ctx context.Context, w *airlock.Webhook) error {
	ctx, done := db.bound(ctx)
	defer done()
	if w.TenantID == "" || w.URL == "" || len(w.SealedSecret) == 0 || w.KeyID == "" {
		return airlock.Errorf(airlock.EINVALID, "webhook tenant, url and sealed secret are required")
	}
	now := db.now()
	if w.ID == "" {
		w.ID = db.newID(now)
	}
	w.CreatedAt = stamp(w.CreatedAt, now)
	_, err := db.write.ExecContext(ctx, `INSERT INTO webhooks (id, tenant_id, url, events, sealed_secret, key_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, w.ID, w.TenantID, db.text(w.URL), eventsText(w.Events), w.SealedSecret, w.KeyID, nanos(w.CreatedAt))
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(w.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "webhook %s exists", w.ID)
	}
	return db.wrap(ctx, "create webhook", err)
}

const webhookColumns = `id, tenant_id, url, events, sealed_secret, key_id, created_at`

func scanWebhook(row scanner) (*airlock.Webhook, error) {
	var w airlock.Webhook
	var events string
	var at int64
	if err := row.Scan(&w.ID, &w.TenantID, &w.URL, &events, &w.SealedSecret, &w.KeyID, &at); err != nil {
		return nil, err
	}
	w.Events, w.CreatedAt = eventsOf(events), fromNanos(at)
	return &w, nil
}

// Webhook returns the tenant's webhook; another tenant's is not found.
func (db *DB) Webhook(ctx context.Context, tenantID, id string) (*airlock.Webhook, error) {
	ctx, done := db.bound(ctx)
	defer done()
	w, err := scanWebhook(db.read.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, webhookNotFound(id)
	}
	return w, db.wrap(ctx, "webhook", err)
}

// ListWebhooks returns the tenant's webhooks, oldest first.
func (db *DB) ListWebhooks(ctx context.Context, tenantID string) ([]*airlock.Webhook, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, db.wrap(ctx, "list webhooks", err)
	}
	defer rows.Close()
	out := []*airlock.Webhook{}
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list webhooks", err)
		}
		out = append(out, w)
	}
	return out, db.wrap(ctx, "list webhooks", rows.Err())
}

// CountWebhooks is how many webhooks the tenant has.
func (db *DB) CountWebhooks(ctx context.Context, tenantID string) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM webhooks WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, db.wrap(ctx, "count webhooks", err)
}

// DeleteWebhook removes the tenant's webhook and its deliveries.
func (db *DB) DeleteWebhook(ctx context.Context, tenantID, id string) error {
	ctx, done := db.bound(ctx)
	defer done()
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE id = $1 AND tenant_id = $2`, id, tenantID)
		if err != nil {
			return err
		}
		if affected(res) == 0 {
			return webhookNotFound(id)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1`, id)
		return err
	})
	return db.wrap(ctx, "delete webhook", err)
}

const deliveryColumns = `id, webhook_id, tenant_id, event_id, event_type, state, attempts, last_status, last_error,
	created_at, next_at, delivered_at`

func scanDelivery(row scanner) (*airlock.WebhookDelivery, error) {
	var d airlock.WebhookDelivery
	var created, next int64
	var delivered *int64
	if err := row.Scan(&d.ID, &d.WebhookID, &d.TenantID, &d.EventID, &d.EventType, &d.State, &d.Attempts,
		&d.LastStatus, &d.LastError, &created, &next, &delivered); err != nil {
		return nil, err
	}
	d.CreatedAt, d.DeliveredAt = fromNanos(created), fromNullNanos(delivered)
	if d.State == airlock.DeliveryPending {
		t := fromNanos(next)
		d.NextAt = &t
	}
	return &d, nil
}

// ListDeliveries returns up to limit of the webhook's deliveries, newest
// first, before the delivery before.
func (db *DB) ListDeliveries(ctx context.Context, tenantID, webhookID, before string, limit int) ([]*airlock.WebhookDelivery, error) {
	ctx, done := db.bound(ctx)
	defer done()
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	out := []*airlock.WebhookDelivery{}
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM webhooks WHERE id = $1 AND tenant_id = $2`, webhookID, tenantID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return webhookNotFound(webhookID)
		}
		cursor := int64(1<<63 - 1)
		if before != "" {
			err := tx.QueryRowContext(ctx, `SELECT seq FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2`, before, webhookID).Scan(&cursor)
			if errors.Is(err, sql.ErrNoRows) {
				return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", clip(before))
			} else if err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
			WHERE webhook_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`, webhookID, cursor, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "list deliveries", err)
	}
	return out, nil
}

// ReplayDelivery queues one of the tenant's webhook's deliveries again,
// due now, whatever its state; its attempts count on.
func (db *DB) ReplayDelivery(ctx context.Context, tenantID, webhookID, deliveryID string, now time.Time) (*airlock.WebhookDelivery, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var d *airlock.WebhookDelivery
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = $1, next_at = $2, lease_until = 0
			WHERE id = $3 AND webhook_id = $4 AND tenant_id = $5`, airlock.DeliveryPending, nanos(now), deliveryID, webhookID, tenantID)
		if err != nil {
			return err
		}
		if affected(res) == 0 {
			return deliveryNotFound(deliveryID)
		}
		d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = $1`, deliveryID))
		return err
	})
	if err != nil {
		return nil, db.wrap(ctx, "replay delivery", err)
	}
	return d, nil
}

// ClaimDeliveries leases up to limit pending deliveries due by now, not
// leased by anyone now, to node until now+lease. The update re-checks
// the lease, so of nodes racing for one row exactly one gets it.
func (db *DB) ClaimDeliveries(ctx context.Context, node string, now time.Time, lease time.Duration, limit int) ([]*airlock.WebhookDelivery, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var out []*airlock.WebhookDelivery
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM webhook_deliveries WHERE state = $1 AND next_at <= $2 AND lease_until <= $2
			ORDER BY next_at, seq LIMIT $3`, airlock.DeliveryPending, nanos(now), limit)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET lease_until = $1, lease_node = $2
				WHERE id = $3 AND state = $4 AND lease_until <= $5`, nanos(now.Add(lease)), node, id, airlock.DeliveryPending, nanos(now))
			if err != nil {
				return err
			}
			if affected(res) == 0 {
				continue // another node took it
			}
			d, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = $1`, id))
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, db.wrap(ctx, "claim deliveries", err)
	}
	return out, nil
}

// FinishAttempt records one try of a delivery and lets go of its lease.
func (db *DB) FinishAttempt(ctx context.Context, a airlock.DeliveryAttempt) error {
	ctx, done := db.bound(ctx)
	defer done()
	next := nanos(a.At)
	if a.NextAt != nil {
		next = nanos(*a.NextAt)
	}
	var delivered *int64
	if a.State == airlock.DeliveryDelivered {
		delivered = nullNanos(&a.At)
	}
	_, err := db.write.ExecContext(ctx, `UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, last_status = $2,
		last_error = $3, next_at = $4, delivered_at = coalesce($5, delivered_at), lease_until = 0, lease_node = ''
		WHERE id = $6`, a.State, a.Status, db.clip(a.Error), next, delivered, a.DeliveryID)
	return db.wrap(ctx, "finish delivery attempt", err)
}
