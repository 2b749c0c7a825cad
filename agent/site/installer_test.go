package site

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
)

// fixedSource is a ModelSource holding one artifact (none: ErrNoModel,
// as flclient.Client says it), or failing with err; it counts calls.
type fixedSource struct {
	mu    sync.Mutex
	raw   []byte
	err   error
	calls int
}

func (f *fixedSource) InstalledInt8Bytes() (*flclient.Installed, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	switch {
	case f.err != nil:
		return nil, nil, f.err
	case f.raw == nil:
		return nil, nil, fmt.Errorf("installed model: %w", flclient.ErrNoModel)
	}
	return &flclient.Installed{Version: 1}, f.raw, nil
}

func (f *fixedSource) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fixedSource) set(raw []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raw = raw
}

func (f *fixedSource) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestInstaller writes verified models into the ConfigMap: created, the
// same again unchanged, a newer one updated, an older one or another of
// the same version refused (the newer one stays), untrusted, unsigned and
// float32 artifacts refused, an unverifiable artifact in the ConfigMap
// replaced.
func TestInstaller(t *testing.T) {
	ctx := context.Background()
	coord, rogue := key(t, 1), key(t, 2)
	client := fake.NewClientset()
	reg := prometheus.NewRegistry()
	cfg := DefaultInstallerConfig()
	cfg.Client, cfg.Keys, cfg.Source, cfg.Identity, cfg.Registerer = kubeclientset.Wrap(client), keyring(t, coord), &fixedSource{}, "node-a", reg
	in, err := NewInstaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v2, v3, v3b := int8Bytes(t, coord, 1, 2), int8Bytes(t, coord, 1, 3), int8Bytes(t, coord, 2, 3)
	floatArt, err := quant.FromModel(smallModel(t, 1).Float(), quant.Info{Version: 9})
	if err != nil {
		t.Fatal(err)
	}
	floatBytes, err := floatArt.Encode(coord)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := floatArt.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		raw     []byte
		action  string
		err     error
		version uint64 // in the ConfigMap afterwards
	}{
		{"create", v2, ActionCreated, nil, 2},
		{"same again", v2, ActionUnchanged, nil, 2},
		{"newer", v3, ActionUpdated, nil, 3},
		{"older", v2, "", ErrOlder, 3},
		{"another model, same version", v3b, "", ErrOlder, 3},
		{"untrusted key", int8Bytes(t, rogue, 1, 7), "", ErrUntrusted, 3},
		{"unsigned", unsigned, "", ErrUntrusted, 3},
		{"float32", floatBytes, "", ErrUntrusted, 3},
		{"garbage", []byte("not a model"), "", ErrUntrusted, 3},
	}
	for _, s := range steps {
		res, err := in.Install(ctx, s.raw)
		if !errors.Is(err, s.err) || (s.err == nil && res.Action != s.action) {
			t.Fatalf("%s: %+v, %v; want %s, %v", s.name, res, err, s.action, s.err)
		}
		cm, gerr := client.CoreV1().ConfigMaps(kubefmt.DefaultModelConfigMapNamespace).Get(ctx, kubefmt.DefaultModelConfigMapName, metav1.GetOptions{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		a, derr := quant.Decode(cm.BinaryData[kubefmt.DefaultModelConfigMapKey], quant.DecodeOptions{Keys: cfg.Keys})
		if derr != nil || a.Header.Version != s.version || cm.Annotations[AnnotationInstalledBy] != "node-a" {
			t.Fatalf("%s: ConfigMap holds %v (%v), want version %d", s.name, a, derr, s.version)
		}
	}
	// an artifact the keys do not verify, put there by someone: replaced
	cm, _ := client.CoreV1().ConfigMaps(kubefmt.DefaultModelConfigMapNamespace).Get(ctx, kubefmt.DefaultModelConfigMapName, metav1.GetOptions{})
	cm.BinaryData = nil
	cm.Data = map[string]string{kubefmt.DefaultModelConfigMapKey: string(int8Bytes(t, rogue, 1, 99))}
	if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := in.Install(ctx, v3)
	if err != nil || res.Action != ActionUpdated {
		t.Fatalf("replacing an unverifiable model: %+v, %v", res, err)
	}
	cm, _ = client.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
	if _, ok := cm.Data[kubefmt.DefaultModelConfigMapKey]; ok || len(cm.BinaryData[kubefmt.DefaultModelConfigMapKey]) == 0 {
		t.Fatal("the model is not (only) in binaryData")
	}
	// created 1, unchanged 1, updated 2, older 2, refused 4
	for result, want := range map[string]float64{"created": 1, "unchanged": 1, "updated": 2, "older": 2, "refused": 4} {
		if got := testutil.ToFloat64(in.installs.WithLabelValues(result)); got != want {
			t.Errorf("installs{result=%s} = %v, want %v", result, got, want)
		}
	}
}

// TestInstallerRun follows the source: nothing installed yet writes
// nothing; a model appears and Notify writes it.
func TestInstallerRun(t *testing.T) {
	coord := key(t, 1)
	client := fake.NewClientset()
	src := &fixedSource{}
	cfg := DefaultInstallerConfig()
	cfg.Client, cfg.Keys, cfg.Source, cfg.Namespace = kubeclientset.Wrap(client), keyring(t, coord), src, "edge"
	in, err := NewInstaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runBackground(t, in.Run)
	get := func() (*v1.ConfigMap, error) {
		return client.CoreV1().ConfigMaps("edge").Get(context.Background(), kubefmt.DefaultModelConfigMapName, metav1.GetOptions{})
	}
	// the first check at start and one on Notify: nothing to write
	poll(t, 5*time.Second, "two checks of the source", func() (bool, string) {
		in.Notify()
		return src.called() >= 2, fmt.Sprint(src.called())
	})
	if _, err := get(); err == nil {
		t.Fatal("a ConfigMap was written with no model installed")
	}
	src.set(int8Bytes(t, coord, 1, 4))
	in.Notify()
	poll(t, 5*time.Second, "the model in the ConfigMap", func() (bool, string) {
		cm, err := get()
		if err != nil {
			return false, err.Error()
		}
		return cm.Annotations[AnnotationModelVersion] == "4", cm.Annotations[AnnotationModelVersion]
	})
	stop()
}

// brokenSource has a record of an installed model whose artifact does not
// verify (what flclient returns when the stored blob is damaged).
type brokenSource struct{}

func (brokenSource) InstalledInt8Bytes() (*flclient.Installed, []byte, error) {
	return &flclient.Installed{Version: 5}, nil, errors.New("installed version 5: quant: bad signature")
}

// TestInstallerSourceErrors: only flclient.ErrNoModel means "no model
// yet" (nothing written, nothing counted, no error); any other failure
// to read the source is counted and returned, so Run logs and retries it.
func TestInstallerSourceErrors(t *testing.T) {
	coord := key(t, 1)
	storeErr := errors.New("open agent.db: bolt: timeout")
	cases := []struct {
		name    string
		src     ModelSource
		wantErr error  // nil: sync succeeds
		counted string // the installs_total result counted once ("": none)
	}{
		{"no model yet", &fixedSource{}, nil, ""},
		{"no model yet, deeper wrap", &fixedSource{err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", flclient.ErrNoModel))}, nil, ""},
		{"store unreadable", &fixedSource{err: storeErr}, storeErr, resultSourceError},
		{"installed artifact does not verify", brokenSource{}, errors.New(""), "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			cfg := DefaultInstallerConfig()
			cfg.Client, cfg.Keys, cfg.Source = kubeclientset.Wrap(client), keyring(t, coord), tc.src
			in, err := NewInstaller(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = in.sync(context.Background())
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("sync: %v, want nil (no model yet)", err)
			case tc.wantErr != nil && err == nil:
				t.Fatal("sync: nil, want the source's error")
			case tc.wantErr == storeErr && !errors.Is(err, storeErr):
				t.Fatalf("sync: %v, want it to wrap %v", err, storeErr)
			}
			for _, result := range []string{resultSourceError, "refused", "failed"} {
				want := 0.0
				if result == tc.counted {
					want = 1
				}
				if got := testutil.ToFloat64(in.installs.WithLabelValues(result)); got != want {
					t.Errorf("installs{result=%s} = %v, want %v", result, got, want)
				}
			}
			if cms, _ := client.CoreV1().ConfigMaps(cfg.Namespace).List(context.Background(), metav1.ListOptions{}); len(cms.Items) != 0 {
				t.Errorf("%d ConfigMaps written", len(cms.Items))
			}
		})
	}
}

// TestInstallerRetriesSourceErrors: Run retries a failing source with its
// backoff (Resync is an hour and nobody calls Notify, so every call after
// the first is a retry), counting each failure, and installs the model
// once the source reads again.
func TestInstallerRetriesSourceErrors(t *testing.T) {
	coord := key(t, 1)
	client := fake.NewClientset()
	src := &fixedSource{err: errors.New("open agent.db: bolt: timeout")}
	cfg := DefaultInstallerConfig()
	cfg.Client, cfg.Keys, cfg.Source, cfg.Namespace = kubeclientset.Wrap(client), keyring(t, coord), src, "edge"
	cfg.Resync, cfg.BackoffMin, cfg.BackoffMax, cfg.Seed = time.Hour, 5*time.Millisecond, 20*time.Millisecond, 3
	in, err := NewInstaller(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runBackground(t, in.Run)
	poll(t, 5*time.Second, "three retries of the failing source", func() (bool, string) {
		n := testutil.ToFloat64(in.installs.WithLabelValues(resultSourceError))
		return src.called() >= 3 && n >= 3, fmt.Sprintf("%d calls, %v counted", src.called(), n)
	})
	src.set(int8Bytes(t, coord, 1, 6))
	src.fail(nil)
	poll(t, 5*time.Second, "the model in the ConfigMap after the source recovered", func() (bool, string) {
		cm, err := client.CoreV1().ConfigMaps("edge").Get(context.Background(), kubefmt.DefaultModelConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cm.Annotations[AnnotationModelVersion] == "6", cm.Annotations[AnnotationModelVersion]
	})
	stop()
}
