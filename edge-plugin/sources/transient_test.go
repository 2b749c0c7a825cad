package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
)

// TestTransientStateRefusalIsRetried: the state file is locked by another
// holder (the old scheduler pod during a rollout, sharing the hostPath)
// for longer than its open timeout, so the rollback floor cannot be
// written and a valid model is refused (reason state). Once the lock is
// free, the same bytes must be installed: by the file poller's next
// LoadFile, and by the ConfigMap source on its own (no ConfigMap update
// comes). Before the fix the bytes were remembered as seen before the
// install ran, and never offered again.
func TestTransientStateRefusalIsRetried(t *testing.T) {
	key := plugintest.Signer(t, 1)
	keys := plugintest.Keyring(t, key)
	raw := plugintest.Variant(t, key, 5, plugintest.Artifact(t).Header.Created, 0)
	cases := []struct {
		name string
		// first offers raw while the state file is locked; again offers it
		// once the lock is free (nothing, for a source that must retry on
		// its own)
		first, again func(t *testing.T, ctx context.Context, s *ModelStore, path string)
	}{
		{
			name: "file",
			first: func(t *testing.T, _ context.Context, s *ModelStore, path string) {
				ok, err := s.LoadFile(path)
				var re *RefusalError
				if ok || !errors.As(err, &re) || re.Reason != RefuseState {
					t.Fatalf("load with the state file locked: %v %v, want a %s refusal", ok, err, RefuseState)
				}
			},
			again: func(t *testing.T, _ context.Context, s *ModelStore, path string) {
				if ok, err := s.LoadFile(path); !ok || err != nil {
					t.Fatalf("load once the lock is free: %v %v, want installed", ok, err)
				}
			},
		},
		{
			name: "configmap",
			first: func(t *testing.T, ctx context.Context, s *ModelStore, _ string) {
				cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "edge-system", Name: "model"}, BinaryData: map[string][]byte{"m": raw}}
				ctx, cancel := context.WithCancel(ctx)
				_, wait := StartModelSource(ctx, fake.NewClientset(cm), nil, s, "edge-system", "model", "m")
				t.Cleanup(func() { cancel(); wait() })
				if s.Current() != nil {
					t.Fatal("installed with the state file locked")
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits out the 5 s lock timeout once
			dir := t.TempDir()
			state, path := filepath.Join(dir, "plugin.db"), filepath.Join(dir, "policy.esa")
			store, err := OpenModelStore(ModelStoreOptions{Keys: keys, StatePath: state})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(state, 0o600, nil) // another holder of the lock
			if err != nil {
				t.Fatal(err)
			}
			tc.first(t, t.Context(), store, path)
			if err := db.Close(); err != nil { // the lock is free again
				t.Fatal(err)
			}
			if tc.again != nil {
				tc.again(t, t.Context(), store, path)
			}
			deadline := time.Now().Add(20 * time.Second)
			for store.Current() == nil {
				if time.Now().After(deadline) {
					t.Fatal("the valid model was never installed after the transient state-file failure")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if v, _ := store.Floor(); store.Current().Header.Version != 5 || v != 5 {
				t.Fatalf("model v%d, floor %d; want 5 and 5", store.Current().Header.Version, v)
			}
		})
	}
}
