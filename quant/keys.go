package quant

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgesched/edgesched/internal/boundedio"
)

// Key errors.
var (
	ErrKey        = errors.New("quant: bad key")
	ErrUnknownKey = errors.New("quant: unknown signing key")
	// ErrRetiredKey: the artifact's key was retired by a key rotation
	// (it also matches ErrUnknownKey: the key is no longer trusted).
	ErrRetiredKey = fmt.Errorf("%w: retired", ErrUnknownKey)
)

// KeyID names a public key: "ed25519:" and the first 16 hex digits of
// the SHA-256 of the key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// Signer signs artifacts with one private key.
type Signer struct {
	ID   string
	priv ed25519.PrivateKey
}

// NewSigner wraps a private key.
func NewSigner(priv ed25519.PrivateKey) (*Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key of %d bytes", ErrKey, len(priv))
	}
	return &Signer{ID: KeyID(priv.Public().(ed25519.PublicKey)), priv: priv}, nil
}

// GenerateKey makes a key pair from r (crypto/rand.Reader in production;
// a seeded reader gives reproducible test keys).
func GenerateKey(r io.Reader) (*Signer, ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	s, err := NewSigner(priv)
	return s, pub, err
}

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Sign signs a message with the private key.
func (s *Signer) Sign(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// Keyring holds the public keys artifacts may be signed with, by key ID,
// and the IDs of retired keys (Retire), which are refused even when the
// key is also added. The zero value is empty; a Keyring is read-only once
// built and safe for concurrent use.
type Keyring struct {
	keys    map[string]ed25519.PublicKey
	retired map[string]bool
}

// Add trusts a public key and returns its ID.
func (k *Keyring) Add(pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: public key of %d bytes", ErrKey, len(pub))
	}
	if k.keys == nil {
		k.keys = map[string]ed25519.PublicKey{}
	}
	id := KeyID(pub)
	k.keys[id] = append(ed25519.PublicKey(nil), pub...)
	return id, nil
}

// Lookup returns the key with an ID; a retired key is refused with
// ErrRetiredKey (which also matches ErrUnknownKey).
func (k *Keyring) Lookup(id string) (ed25519.PublicKey, error) {
	if k.retired[id] {
		return nil, fmt.Errorf("%w: %q was retired (key rotation); artifacts it signed are no longer trusted", ErrRetiredKey, id)
	}
	if pub, ok := k.keys[id]; ok {
		return pub, nil
	}
	return nil, fmt.Errorf("%w: %q is not in the keyring", ErrUnknownKey, id)
}

// IDs lists the trusted key IDs (retired keys excluded).
func (k *Keyring) IDs() []string {
	var out []string
	for id := range k.keys {
		if !k.retired[id] {
			out = append(out, id)
		}
	}
	return out
}

// Key files are one line: "edgesched-ed25519-private KEYID BASE64" or
// "edgesched-ed25519-public KEYID BASE64" (the 32-byte seed or key).
const (
	privPrefix = "edgesched-ed25519-private"
	pubPrefix  = "edgesched-ed25519-public"
)

// WriteKeyPair writes NAME.key (mode 0600) and NAME.pub into dir and
// returns their paths. It refuses to overwrite an existing private key.
func WriteKeyPair(dir, name string, s *Signer) (privPath, pubPath string, err error) {
	privPath = filepath.Join(dir, name+".key")
	pubPath = filepath.Join(dir, name+".pub")
	f, err := os.OpenFile(privPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("write private key: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", privPrefix, s.ID, base64.StdEncoding.EncodeToString(s.priv.Seed()))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", fmt.Errorf("write private key: %w", err)
	}
	line := fmt.Sprintf("%s %s %s\n", pubPrefix, s.ID, base64.StdEncoding.EncodeToString(s.Public()))
	if err := os.WriteFile(pubPath, []byte(line), 0o644); err != nil {
		return "", "", fmt.Errorf("write public key: %w", err)
	}
	return privPath, pubPath, nil
}

// maxKeyFileBytes caps a key file (one short line).
const maxKeyFileBytes = 4096

func readKeyLine(path, prefix string, size int) (string, []byte, error) {
	b, err := boundedio.ReadFile(context.Background(), path, maxKeyFileBytes)
	if errors.Is(err, boundedio.ErrTooLarge) || errors.Is(err, boundedio.ErrNotRegular) {
		return "", nil, fmt.Errorf("%w: not a key file: %w", ErrKey, err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("read key: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != prefix {
		return "", nil, fmt.Errorf("%w: %s: want one line %q KEYID BASE64", ErrKey, path, prefix)
	}
	raw, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(raw) != size {
		return "", nil, fmt.Errorf("%w: %s: key is not %d base64 bytes", ErrKey, path, size)
	}
	return f[1], raw, nil
}

// ReadSigner reads a private key file written by WriteKeyPair.
func ReadSigner(path string) (*Signer, error) {
	id, seed, err := readKeyLine(path, privPrefix, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	s, err := NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, err
	}
	if s.ID != id {
		return nil, fmt.Errorf("%w: %s: key ID %s does not match the key (%s)", ErrKey, path, id, s.ID)
	}
	return s, nil
}

// ReadPublicKey reads a public key file written by WriteKeyPair.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	id, raw, err := readKeyLine(path, pubPrefix, ed25519.PublicKeySize)
	if err != nil {
		return nil, err
	}
	pub := ed25519.PublicKey(raw)
	if KeyID(pub) != id {
		return nil, fmt.Errorf("%w: %s: key ID %s does not match the key (%s)", ErrKey, path, id, KeyID(pub))
	}
	return pub, nil
}

// LoadKeyring trusts every public key file given: files, or directories
// whose *.pub files are read. Files named *.retired (given, or found in a
// directory) hold retired public keys (RetiredSuffix): they are refused
// even if a .pub of the same key is also present (docs/security.md).
func LoadKeyring(paths ...string) (*Keyring, error) {
	k := &Keyring{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
		files := []string{p}
		if st.IsDir() {
			// listed, not globbed: a directory whose path holds glob
			// metacharacters ("keys[1]", "keys*") is that directory, never
			// none or its siblings
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("keyring: %w", err)
			}
			var pubs, retired []string
			for _, e := range entries {
				switch {
				case strings.HasSuffix(e.Name(), ".pub"):
					pubs = append(pubs, filepath.Join(p, e.Name()))
				case strings.HasSuffix(e.Name(), RetiredSuffix):
					retired = append(retired, filepath.Join(p, e.Name()))
				}
			}
			files = append(pubs, retired...)
		}
		for _, f := range files {
			pub, err := ReadPublicKey(f)
			if err != nil {
				return nil, err
			}
			if strings.HasSuffix(f, RetiredSuffix) {
				_, err = k.Retire(pub)
			} else {
				_, err = k.Add(pub)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return k, nil
}
