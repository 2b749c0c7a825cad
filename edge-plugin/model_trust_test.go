package edgeplugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgesched/edgesched/quant"
)

// variant re-signs the test artifact as version, created at created; a
// non-zero tweak changes one weight (another model ID, same shape).
func variant(t testing.TB, s *quant.Signer, version uint64, created time.Time, tweak int8) []byte {
	t.Helper()
	base := testArtifact(t)
	a := quant.Artifact{Header: base.Header}
	for _, tn := range base.Tensors {
		c := tn
		c.F32, c.I8, c.I32 = append([]float32(nil), tn.F32...), append([]int8(nil), tn.I8...), append([]int32(nil), tn.I32...)
		if c.Name == "w1" && tweak != 0 {
			c.I8[0] = max(-127, min(127, c.I8[0]+tweak))
			if c.I8[0] == tn.I8[0] {
				c.I8[0] -= tweak
			}
		}
		a.Tensors = append(a.Tensors, c)
	}
	a.Header.Version, a.Header.Created = version, created
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestModelTrustRefusals: every model-trust rule in the plugin's model
// store, each a named case: the store runs version 5 and must refuse each
// offer with its reason and cause while keeping version 5; the rollback
// floor then survives a restart (a new store on the same state file).
// The keyring trusts the new key and has the old one retired (rotation).
func TestModelTrustRefusals(t *testing.T) {
	newKey, oldKey, stranger := testSigner(t, 1), testSigner(t, 50), testSigner(t, 99)
	keys := testKeyring(t, newKey)
	if _, err := keys.Retire(oldKey.Public()); err != nil {
		t.Fatal(err)
	}
	created := testArtifact(t).Header.Created
	now := created.Add(time.Hour)
	opts := ModelStoreOptions{Keys: keys, StatePath: filepath.Join(t.TempDir(), "state", "plugin.db"), MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}
	store, err := OpenModelStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := store.Install(variant(t, newKey, 5, created, 0)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	good := store.Current()
	tampered := variant(t, newKey, 6, created, 0)
	tampered[len(tampered)-100] ^= 1
	cases := []struct {
		name   string
		raw    []byte
		reason string
		is     error
	}{
		{"old version", variant(t, newKey, 4, created, 0), refuseRollback, quant.ErrRollback},
		{"same version, another model", variant(t, newKey, 5, created, 3), refuseRollback, quant.ErrRollback},
		{"wrong key", variant(t, stranger, 6, created, 0), refuseSignature, quant.ErrUnknownKey},
		{"retired key", variant(t, oldKey, 6, created, 0), refuseSignature, quant.ErrRetiredKey},
		{"tampered payload", tampered, refuseSignature, quant.ErrSignature},
		{"stale model claiming to be current", variant(t, newKey, 6, created.Add(-48*time.Hour), 0), refuseStale, quant.ErrStale},
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
		}{{"version 4", variant(t, newKey, 4, created, 0)}, {"version 5, another model", variant(t, newKey, 5, created, 3)}} {
			ok, err := restarted.Install(c.raw)
			var re *RefusalError
			if ok || !errors.As(err, &re) || re.Reason != refuseRollback {
				t.Fatalf("%s after restart: %v %v, want a rollback refusal", c.name, ok, err)
			}
		}
		// the same model as the floor is what a restart must accept
		if ok, err := restarted.Install(variant(t, newKey, 5, created, 0)); !ok || err != nil {
			t.Fatalf("the floor's own model after restart: %v %v", ok, err)
		}
		if ok, err := restarted.Install(variant(t, newKey, 6, created, 0)); !ok || err != nil {
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
		if ok, err := s2.Install(variant(t, newKey, 5, created, 0)); !ok || err != nil {
			t.Fatal(ok, err)
		}
		// the state file is replaced by a directory: bbolt cannot open it
		if err := os.Remove(s2.trust.statePath); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(s2.trust.statePath, 0o700); err != nil {
			t.Fatal(err)
		}
		ok, err := s2.Install(variant(t, newKey, 6, created, 0))
		var re *RefusalError
		if ok || !errors.As(err, &re) || re.Reason != refuseState || s2.Current().Header.Version != 5 {
			t.Fatalf("Install = %v, %v (running %d); want a state refusal keeping version 5", ok, err, s2.Current().Header.Version)
		}
	})
}

// TestModelStateFileDamaged: a damaged or foreign state file stops the
// store from opening (starting without the floor would allow rollbacks).
func TestModelStateFileDamaged(t *testing.T) {
	keys := testKeyring(t, testSigner(t, 1))
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
	raw, err := os.ReadFile(filepath.Join("..", "quant", "testdata", "floor-plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := testSigner(t, 1)
	created := testArtifact(t).Header.Created
	v7 := variant(t, s, 7, created, 0)
	a, err := quant.Decode(v7, quant.DecodeOptions{Keys: testKeyring(t, s)})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plugin.db")
	if err := putRaw(p, stateFloor, raw); err != nil {
		t.Fatal(err)
	}
	store, err := OpenModelStore(ModelStoreOptions{Keys: testKeyring(t, s), StatePath: p})
	if err != nil {
		t.Fatal(err)
	}
	if v, id := store.Floor(); v != 7 || id != a.Header.ModelID {
		t.Fatalf("floor %d %s, want 7 %s", v, id, a.Header.ModelID)
	}
	var re *RefusalError
	if ok, err := store.Install(variant(t, s, 6, created, 0)); ok || !errors.As(err, &re) || re.Reason != refuseRollback {
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

// TestModelTrustArgs: the plugin's args wire the state file and the age
// limit through New, and bad values are refused.
func TestModelTrustArgs(t *testing.T) {
	dir := t.TempDir()
	s := testSigner(t, 1)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	created := testArtifact(t).Header.Created
	path := writeFile(t, dir, "model.esa", variant(t, s, 7, created, 0))
	state := filepath.Join(dir, "state.db")
	raw := fmt.Sprintf(`{"modelPath":%q,"modelKeys":[%q],"modelStatePath":%q}`, path, pub, state)
	pl, err := New(t.Context(), &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := pl.(*EdgePolicy).Models().Floor(); v != 7 {
		t.Fatalf("floor %d after loading version 7, want 7", v)
	}
	// a restarted plugin finds version 4 in the file: refused, nothing runs
	writeFile(t, dir, "model.esa", variant(t, s, 4, created, 0))
	pl, err = New(t.Context(), &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := pl.(*EdgePolicy).Models().Current(); m != nil {
		t.Fatalf("restarted plugin runs version %d below its floor", m.Header.Version)
	}
	for _, bad := range []string{
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"soon"}`,
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"1s"}`,
		`{"modelPath":"m","modelKeys":["k"],"modelMaxAge":"100000h"}`,
	} {
		if _, err := DecodeArgs(&runtime.Unknown{Raw: []byte(bad)}); !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), "modelMaxAge") {
			t.Errorf("DecodeArgs(%s) = %v, want ErrArgs naming modelMaxAge", bad, err)
		}
	}
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
