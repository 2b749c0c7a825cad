package sources

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/quant"
)

// TestModelTrustRefusals: every model-trust rule in the plugin's model
// store, each a named case: the store runs version 5 and must refuse each
// offer with its reason and cause while keeping version 5; the rollback
// floor then survives a restart (a new store on the same state file).
// The keyring trusts the new key and has the old one retired (rotation).
func TestModelTrustRefusals(t *testing.T) {
	newKey, oldKey, stranger := plugintest.Signer(t, 1), plugintest.Signer(t, 50), plugintest.Signer(t, 99)
	keys := plugintest.Keyring(t, newKey)
	if _, err := keys.Retire(oldKey.Public()); err != nil {
		t.Fatal(err)
	}
	created := plugintest.Artifact(t).Header.Created
	now := created.Add(time.Hour)
	opts := ModelStoreOptions{Keys: keys, StatePath: filepath.Join(t.TempDir(), "state", "plugin.db"), MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}
	store, err := OpenModelStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := store.Install(plugintest.Variant(t, newKey, 5, created, 0)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	good := store.Current()
	tampered := plugintest.Variant(t, newKey, 6, created, 0)
	tampered[len(tampered)-100] ^= 1
	cases := []struct {
		name   string
		raw    []byte
		reason string
		is     error
	}{
		{"old version", plugintest.Variant(t, newKey, 4, created, 0), RefuseRollback, quant.ErrRollback},
		{"same version, another model", plugintest.Variant(t, newKey, 5, created, 3), RefuseRollback, quant.ErrRollback},
		{"wrong key", plugintest.Variant(t, stranger, 6, created, 0), RefuseSignature, quant.ErrUnknownKey},
		{"retired key", plugintest.Variant(t, oldKey, 6, created, 0), RefuseSignature, quant.ErrRetiredKey},
		{"tampered payload", tampered, RefuseSignature, quant.ErrSignature},
		{"stale model claiming to be current", plugintest.Variant(t, newKey, 6, created.Add(-48*time.Hour), 0), RefuseStale, quant.ErrStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := store.Install(tc.raw)
			var re *RefusalError
			if ok || !errors.As(err, &re) || re.Reason != tc.reason || !errors.Is(err, tc.is) {
				t.Fatalf("Install = %v, %v; want a %s refusal wrapping %v", ok, err, tc.reason, tc.is)
			}
			if store.Current() != good {
				t.Fatal("the running model was replaced")
			}
			t.Logf("refused: %v", err)
		})
	}
	if v, id := store.Floor(); v != 5 || id != good.Header.ModelID {
		t.Fatalf("floor %d %s, want 5 %s", v, id, good.Header.ModelID)
	}

	t.Run("restart then old version", func(t *testing.T) {
		restarted, err := OpenModelStore(opts)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := restarted.Floor(); v != 5 || restarted.Current() != nil {
			t.Fatalf("after restart: floor %d, current %v; want floor 5 and nothing loaded", v, restarted.Current())
		}
		for _, c := range []struct {
			name string
			raw  []byte
		}{{"version 4", plugintest.Variant(t, newKey, 4, created, 0)}, {"version 5, another model", plugintest.Variant(t, newKey, 5, created, 3)}} {
			ok, err := restarted.Install(c.raw)
			var re *RefusalError
			if ok || !errors.As(err, &re) || re.Reason != RefuseRollback {
				t.Fatalf("%s after restart: %v %v, want a rollback refusal", c.name, ok, err)
			}
		}
		// the same model as the floor is what a restart must accept
		if ok, err := restarted.Install(plugintest.Variant(t, newKey, 5, created, 0)); !ok || err != nil {
			t.Fatalf("the floor's own model after restart: %v %v", ok, err)
		}
		if ok, err := restarted.Install(plugintest.Variant(t, newKey, 6, created, 0)); !ok || err != nil {
			t.Fatalf("a newer model: %v %v", ok, err)
		}
		if v, _ := restarted.Floor(); v != 6 {
			t.Fatalf("floor %d after version 6, want 6", v)
		}
	})

	t.Run("the floor cannot be recorded", func(t *testing.T) {
		s2, err := OpenModelStore(ModelStoreOptions{Keys: keys, StatePath: filepath.Join(t.TempDir(), "p.db")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s2.Install(plugintest.Variant(t, newKey, 5, created, 0)); !ok || err != nil {
			t.Fatal(ok, err)
		}
		// the state file is replaced by a directory: bbolt cannot open it
		if err := os.Remove(s2.trust.statePath); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(s2.trust.statePath, 0o700); err != nil {
			t.Fatal(err)
		}
		ok, err := s2.Install(plugintest.Variant(t, newKey, 6, created, 0))
		var re *RefusalError
		if ok || !errors.As(err, &re) || re.Reason != RefuseState || s2.Current().Header.Version != 5 {
			t.Fatalf("Install = %v, %v (running %d); want a state refusal keeping version 5", ok, err, s2.Current().Header.Version)
		}
	})
}

// TestModelStateFileDamaged: a damaged or foreign state file stops the
// store from opening (starting without the floor would allow rollbacks).
func TestModelStateFileDamaged(t *testing.T) {
	keys := plugintest.Keyring(t, plugintest.Signer(t, 1))
	for _, tc := range []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"garbage floor", func(p string) error { return putRaw(p, stateFloor, []byte("{not json")) }, "bad model state file"},
		{"floor without a model ID", func(p string) error { return putRaw(p, stateFloor, []byte(`{"version":3,"model_id":"x"}`)) }, "bad model state file"},
		{"not a database", func(p string) error { return os.WriteFile(p, []byte("hello"), 0o600) }, "plugin model state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "plugin.db")
			if err := tc.setup(p); err != nil {
				t.Fatal(err)
			}
			_, err := OpenModelStore(ModelStoreOptions{Keys: keys, StatePath: p})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestModelStateFileOldFloor: a state file whose floor the plugin wrote
// before quant.Floor (quant/testdata/floor-plugin.json: the old encoder's
// bytes, after installing the test artifact as version 7) opens with that
// floor: the same model is accepted again, an older version is refused.
func TestModelStateFileOldFloor(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "quant", "testdata", "floor-plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := plugintest.Signer(t, 1)
	created := plugintest.Artifact(t).Header.Created
	v7 := plugintest.Variant(t, s, 7, created, 0)
	a, err := quant.Decode(v7, quant.DecodeOptions{Keys: plugintest.Keyring(t, s)})
	if err != nil {
		t.Fatal(err)
	}
	// the fixture names the ID the test artifact had when it was written;
	// the ID follows the shipped default model, so the current one takes
	// its place (the bytes' format is what is under test)
	const fixtureID = "68279a9a621f3ca07c89c90ece37e759d2a238d09a5cf1bf1db0468d54caae33"
	if !bytes.Contains(raw, []byte(fixtureID)) {
		t.Fatalf("the fixture does not name %s", fixtureID)
	}
	raw = bytes.Replace(raw, []byte(fixtureID), []byte(a.Header.ModelID), 1)
	p := filepath.Join(t.TempDir(), "plugin.db")
	if err := putRaw(p, stateFloor, raw); err != nil {
		t.Fatal(err)
	}
	store, err := OpenModelStore(ModelStoreOptions{Keys: plugintest.Keyring(t, s), StatePath: p})
	if err != nil {
		t.Fatal(err)
	}
	if v, id := store.Floor(); v != 7 || id != a.Header.ModelID {
		t.Fatalf("floor %d %s, want 7 %s", v, id, a.Header.ModelID)
	}
	var re *RefusalError
	if ok, err := store.Install(plugintest.Variant(t, s, 6, created, 0)); ok || !errors.As(err, &re) || re.Reason != RefuseRollback {
		t.Fatalf("version 6 below the old floor: %v %v, want a rollback refusal", ok, err)
	}
	if ok, err := store.Install(v7); !ok || err != nil {
		t.Fatalf("the old floor's own model: %v %v", ok, err)
	}
}

func putRaw(path string, key, val []byte) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(stateBucket)
		if err != nil {
			return err
		}
		if err := b.Put(stateSchema, []byte(stateSchemaVersion)); err != nil {
			return err
		}
		return b.Put(key, val)
	})
}

// FuzzDecodeFloor: the state file's floor record decoder never crashes
// and accepts only records naming a version and a 64-digit model ID.
func FuzzDecodeFloor(f *testing.F) {
	f.Add([]byte(`{"version":5,"model_id":"` + strings.Repeat("ab", 32) + `","accepted":"2026-11-30T12:00:00Z"}`))
	f.Add([]byte(`{"version":0}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := decodeFloor(b)
		if err == nil && (fl.Version == 0 || len(fl.ModelID) != 64) {
			t.Fatalf("accepted %+v", fl)
		}
	})
}
