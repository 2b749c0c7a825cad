package natsauth

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nkeys"

	"github.com/edgesched/edgesched/internal/boundedio"
)

// NewUserKey makes a NATS user NKey pair from r (crypto/rand.Reader in
// production: key material is never seeded).
func NewUserKey(r io.Reader) (nkeys.KeyPair, error) {
	kp, err := nkeys.CreatePairWithRand(nkeys.PrefixByteUser, r)
	if err != nil {
		return nil, fmt.Errorf("create nkey: %w", err)
	}
	return kp, nil
}

// WriteSeedFile writes kp's seed to path (one line, mode 0600, the
// format nats-server tools and `nats --nkey` read). It refuses to
// overwrite an existing file.
func WriteSeedFile(path string, kp nkeys.KeyPair) error {
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSecret, err)
	}
	defer wipe(seed)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write nkey seed: %w", err)
	}
	_, err = f.Write(append(seed, '\n'))
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write nkey seed %s: %w", path, err)
	}
	return nil
}

// ReadSeedFile reads a user NKey seed file. It refuses a file that group
// or others may read (like ssh does), anything but one user seed, and
// files larger than 4 KiB.
func ReadSeedFile(path string) (nkeys.KeyPair, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSecret, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o: an NKey seed must be readable by its owner only (chmod 600)", ErrSecret, path, st.Mode().Perm())
	}
	if st.Size() > 4096 {
		return nil, fmt.Errorf("%w: %s: %d bytes, not an NKey seed file", ErrSecret, path, st.Size())
	}
	raw, err := boundedio.ReadFile(context.Background(), path, 4096) // a regular file: never a FIFO that blocks
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSecret, err)
	}
	defer wipe(raw)
	kp, err := nkeys.ParseDecoratedUserNKey(bytes.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not hold a user NKey seed (SU...): %v", ErrSecret, path, err)
	}
	return kp, nil
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
