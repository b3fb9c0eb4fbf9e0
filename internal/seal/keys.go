package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// TenantKey is a tenant's data key as stored: wrapped under a master key.
type TenantKey struct {
	TenantID    string
	ID          string // "dk-" and random hex; names the key in every stream it seals
	MasterKeyID string // the master key it is wrapped under now
	Wrapped     []byte // nonce, then the sealed key
	CreatedAt   time.Time
	RotatedAt   *time.Time
}

// KeyStore keeps wrapped tenant data keys.
type KeyStore interface {
	// TenantKey returns the tenant's data key, ErrNotFound if it has none.
	TenantKey(ctx context.Context, tenantID string) (*TenantKey, error)
	// CreateTenantKey records k unless the tenant has a key already; it
	// returns the key the tenant has after the call.
	CreateTenantKey(ctx context.Context, k *TenantKey) (*TenantKey, error)
	// TenantKeys returns every tenant's data key.
	TenantKeys(ctx context.Context) ([]*TenantKey, error)
	// RewrapTenantKey replaces the wrapping of a data key (rotation) if
	// it is still wrapped under oldMasterKeyID.
	RewrapTenantKey(ctx context.Context, tenantID, id, oldMasterKeyID, newMasterKeyID string, wrapped []byte, at time.Time) error
}

// ErrUnknownMasterKey is wrapped when a data key is wrapped under a master
// key the node was not given.
var ErrUnknownMasterKey = errors.New("seal: data key is wrapped under a master key this node does not have")

// Keys hands out tenants' data keys, unwrapped with the node's master
// keys: the current one, which wraps new and rotated keys, and older ones
// that still unwrap keys not yet rotated.
type Keys struct {
	store   KeyStore
	current *MasterKey
	byID    map[string]*MasterKey
	now     func() time.Time

	mu    sync.Mutex
	cache map[string][]byte // tenant -> data key
}

// NewKeys returns the key service over store with the current master key
// and any older ones.
func NewKeys(store KeyStore, current *MasterKey, old ...*MasterKey) (*Keys, error) {
	if store == nil || current == nil {
		return nil, errors.New("seal: a key store and a master key are required")
	}
	k := &Keys{store: store, current: current, byID: map[string]*MasterKey{current.ID(): current}, now: time.Now, cache: map[string][]byte{}}
	for _, o := range old {
		if o != nil {
			k.byID[o.ID()] = o
		}
	}
	return k, nil
}

// Current is the ID of the master key new keys are wrapped under.
func (k *Keys) Current() string { return k.current.ID() }

func wrapAAD(tenantID, id string) []byte {
	return []byte("airlock-data-key-v1\x00" + tenantID + "\x00" + id)
}

func gcmOf(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // keys are always KeySize
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

func wrap(mk *MasterKey, tenantID, id string, dek []byte) []byte {
	g := gcmOf(mk.key[:])
	nonce := make([]byte, g.NonceSize())
	rand.Read(nonce)
	return g.Seal(nonce, nonce, dek, wrapAAD(tenantID, id))
}

func unwrap(mk *MasterKey, tk *TenantKey) ([]byte, error) {
	g := gcmOf(mk.key[:])
	if len(tk.Wrapped) < g.NonceSize()+g.Overhead() {
		return nil, fmt.Errorf("seal: data key of tenant %s is damaged", tk.TenantID)
	}
	n := g.NonceSize()
	dek, err := g.Open(nil, tk.Wrapped[:n], tk.Wrapped[n:], wrapAAD(tk.TenantID, tk.ID))
	if err != nil || len(dek) != KeySize {
		return nil, fmt.Errorf("seal: data key of tenant %s does not open under master key %s", tk.TenantID, mk.ID())
	}
	return dek, nil
}

// DataKey returns the tenant's data key and its ID, making one the first
// time.
func (k *Keys) DataKey(ctx context.Context, tenantID string) (id string, key []byte, err error) {
	tk, err := k.store.TenantKey(ctx, tenantID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		dek := make([]byte, KeySize)
		rand.Read(dek)
		nk := &TenantKey{TenantID: tenantID, ID: "dk-" + airlock.NewID(), MasterKeyID: k.current.ID(), CreatedAt: k.now().UTC()}
		nk.Wrapped = wrap(k.current, tenantID, nk.ID, dek)
		tk, err = k.store.CreateTenantKey(ctx, nk)
	}
	if err != nil {
		return "", nil, err
	}
	dek, err := k.open(tk)
	return tk.ID, dek, err
}

// DataKeyByID returns the tenant's data key with the given ID (the one a
// stream names), ErrWrongKey if the tenant's key is another.
func (k *Keys) DataKeyByID(ctx context.Context, tenantID, id string) ([]byte, error) {
	tk, err := k.store.TenantKey(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if tk.ID != id {
		return nil, ErrWrongKey
	}
	return k.open(tk)
}

func (k *Keys) open(tk *TenantKey) ([]byte, error) {
	k.mu.Lock()
	if dek, ok := k.cache[tk.TenantID+"\x00"+tk.ID]; ok {
		k.mu.Unlock()
		return dek, nil
	}
	k.mu.Unlock()
	mk := k.byID[tk.MasterKeyID]
	if mk == nil {
		return nil, fmt.Errorf("%w (%s; tenant %s)", ErrUnknownMasterKey, tk.MasterKeyID, tk.TenantID)
	}
	dek, err := unwrap(mk, tk)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.cache[tk.TenantID+"\x00"+tk.ID] = dek
	k.mu.Unlock()
	return dek, nil
}

// Rotation says what Rotate did.
type Rotation struct {
	Rewrapped int // data keys now wrapped under the current master key
	Current   int // data keys that were already
}

// Rotate re-wraps every tenant's data key that is not yet under the
// current master key; the data keys themselves, and so every snapshot,
// stay as they are. A key wrapped under a master key this Keys was not
// given is an error (give the old key).
func (k *Keys) Rotate(ctx context.Context) (Rotation, error) {
	all, err := k.store.TenantKeys(ctx)
	if err != nil {
		return Rotation{}, err
	}
	var r Rotation
	var errs []error
	for _, tk := range all {
		if tk.MasterKeyID == k.current.ID() {
			r.Current++
			continue
		}
		dek, err := k.open(tk)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w := wrap(k.current, tk.TenantID, tk.ID, dek)
		if err := k.store.RewrapTenantKey(ctx, tk.TenantID, tk.ID, tk.MasterKeyID, k.current.ID(), w, k.now().UTC()); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Rewrapped++
	}
	return r, errors.Join(errs...)
}
