package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
)

// Start starts the dispatcher; Close stops it.
func (s *Service) Start() {
	s.wg.Add(1)
	go s.loop()
}

// Close stops the dispatcher, waiting for the tries under way.
func (s *Service) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.client.CloseIdleConnections()
	return nil
}

func (s *Service) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		for s.Dispatch(context.Background()) > 0 {
			select {
			case <-s.stop:
				return
			default:
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// Dispatch claims the deliveries due now and tries each once; it
// returns how many it tried.
func (s *Service) Dispatch(ctx context.Context) int {
	now := s.cfg.Now().UTC()
	ds, err := s.cfg.Store.ClaimDeliveries(ctx, s.cfg.Node, now, s.cfg.Lease, s.cfg.Workers*4)
	if err != nil {
		s.cfg.Logger.Error("claim webhook deliveries", "err", err)
		return 0
	}
	// One webhook's deliveries go one after the other, in the order
	// they were queued; different webhooks' at once.
	var order []string
	byHook := map[string][]*airlock.WebhookDelivery{}
	for _, d := range ds {
		if byHook[d.WebhookID] == nil {
			order = append(order, d.WebhookID)
		}
		byHook[d.WebhookID] = append(byHook[d.WebhookID], d)
	}
	sem := make(chan struct{}, s.cfg.Workers)
	done := make(chan struct{})
	for _, h := range order {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			for _, d := range byHook[h] {
				s.try(ctx, d)
			}
		}()
	}
	for range order {
		<-done
	}
	return len(ds)
}

// payload is the body of a delivery: the event, and which delivery.
type payload struct {
	*airlock.Event
	DeliveryID string `json:"delivery_id"`
	WebhookID  string `json:"webhook_id"`
}

// try sends one delivery once and records the outcome.
func (s *Service) try(ctx context.Context, d *airlock.WebhookDelivery) {
	status, err := s.send(ctx, d)
	now := s.cfg.Now().UTC()
	a := airlock.DeliveryAttempt{DeliveryID: d.ID, Status: status, At: now}
	switch {
	case err == nil:
		a.State = airlock.DeliveryDelivered
	case errors.Is(err, ErrRefusedAddress), errors.Is(err, errGone):
		a.State, a.Error = airlock.DeliveryFailed, err.Error()
	default:
		a.Error = err.Error()
		wait := s.cfg.Schedule[min(d.Attempts, len(s.cfg.Schedule)-1)]
		next := now.Add(wait)
		if next.Sub(d.CreatedAt) > s.cfg.Horizon {
			a.State = airlock.DeliveryFailed
			a.Error += fmt.Sprintf("; given up after %d tries over %s", d.Attempts+1, s.cfg.Horizon)
		} else {
			a.State, a.NextAt = airlock.DeliveryPending, &next
		}
	}
	if err != nil {
		s.cfg.Logger.Info("webhook delivery failed", "delivery", d.ID, "webhook", d.WebhookID, "status", status, "state", a.State, "err", err)
	}
	if ferr := s.cfg.Store.FinishAttempt(context.WithoutCancel(ctx), a); ferr != nil {
		s.cfg.Logger.Error("record webhook delivery attempt", "delivery", d.ID, "err", ferr)
	}
}

// errGone: the webhook or the event is no longer there.
var errGone = errors.New("the webhook or its event no longer exists")

// send posts the delivery; nil means the receiver answered 2xx.
func (s *Service) send(ctx context.Context, d *airlock.WebhookDelivery) (int, error) {
	w, err := s.cfg.Store.Webhook(ctx, d.TenantID, d.WebhookID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return 0, errGone
	} else if err != nil {
		return 0, err
	}
	ev, err := s.cfg.Store.Event(ctx, d.EventID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND || (err == nil && ev.TenantID != w.TenantID) {
		return 0, errGone
	} else if err != nil {
		return 0, err
	}
	secret, err := s.openSecret(ctx, w)
	if err != nil {
		return 0, fmt.Errorf("open the webhook's secret: %w", err)
	}
	body, err := json.Marshal(payload{Event: ev, DeliveryID: d.ID, WebhookID: w.ID})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRefusedAddress, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "airlock-webhook/1")
	req.Header.Set(SignatureHeader, Sign(secret, s.cfg.Now(), body))
	req.Header.Set("Airlock-Event-Id", ev.ID)
	req.Header.Set("Airlock-Event-Type", ev.Type)
	req.Header.Set("Airlock-Delivery-Id", d.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
