package quant

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Model trust beyond the signature (docs/security.md): retired keys after
// a key rotation, and the freshness of a model that claims to be current.

// RetiredSuffix names a retired public key file: the NAME.pub file of a
// key, renamed NAME.retired when the key is retired ('edgectl auth
// model-key retire'). LoadKeyring refuses artifacts signed by it.
const RetiredSuffix = ".retired"

// ErrStale: a model's signed creation time is older than the loader's
// maximum model age (freeze protection, CheckFresh).
var ErrStale = errors.New("quant: model is too old")

// Retire marks a public key as retired and returns its ID: Lookup refuses
// it with ErrRetiredKey from then on, whether or not it was added.
func (k *Keyring) Retire(pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: public key of %d bytes", ErrKey, len(pub))
	}
	if k.retired == nil {
		k.retired = map[string]bool{}
	}
	id := KeyID(pub)
	k.retired[id] = true
	return id, nil
}

// Retired lists the retired key IDs, sorted.
func (k *Keyring) Retired() []string {
	var out []string
	for id := range k.retired {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// CheckFresh refuses a model whose signed creation time is more than
// maxAge before now (ErrStale), or that has no creation time at all.
// maxAge <= 0 turns the check off. The creation time is inside the
// signed header, so only the signing key can make a model look fresh: a
// replayed old model (or a feed frozen on one) is refused once it is
// older than maxAge.
func CheckFresh(h *Header, now time.Time, maxAge time.Duration) error {
	if maxAge <= 0 {
		return nil
	}
	if h.Created.IsZero() {
		return fmt.Errorf("%w: version %d (%s) has no creation time", ErrStale, h.Version, ShortID(h.ModelID))
	}
	if age := now.Sub(h.Created); age > maxAge {
		return fmt.Errorf("%w: version %d (%s) was created %s ago (%s), the maximum age is %s",
			ErrStale, h.Version, ShortID(h.ModelID), age.Round(time.Second), h.Created.UTC().Format(time.RFC3339), maxAge)
	}
	return nil
}
