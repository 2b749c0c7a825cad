package site

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// key is a reproducible test key.
func key(t testing.TB, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0x5e}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keyring(t testing.TB, s *quant.Signer) *quant.Keyring {
	t.Helper()
	return fltest.Keyring(t, s)
}

// smallModel is a small network so training and quantizing are quick
// (fltest.SmallModel).
func smallModel(t testing.TB, seed uint64) *nn.Model {
	t.Helper()
	return fltest.SmallModel(t, seed)
}

// int8Bytes is a signed int8 artifact of a small model at version v.
func int8Bytes(t testing.TB, s *quant.Signer, seed, v uint64) []byte {
	t.Helper()
	rows, _ := fltest.CalibrationRows(context.Background(), nil)
	a, err := quant.Quantize(smallModel(t, seed).Float(), rows, quant.DefaultCalibration(), quant.Info{Version: v, Created: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// poll checks cond every 20 ms until it holds or within passes
// (fltest.Eventually).
func poll(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	fltest.Eventually(t, within, what, cond)
}

// runBackground is fltest.RunBackground.
func runBackground(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	return fltest.RunBackground(t, run)
}

// casClientset is a fake clientset that keeps resourceVersions as the
// apiserver does: every create and update gets the next one, and an
// update carrying another object's version than the stored one is
// refused with a Conflict (an update without one is unconditional).
// The fake's own tracker checks none, so agents racing for the ledger on
// a plain fake.NewClientset can both write the same sequence, which a
// real cluster never allows. Reactors run under the fake's lock, so the
// check and the write are one step.
func casClientset() *fake.Clientset {
	c := fake.NewClientset()
	version := 0
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// (a create and an update satisfy each other's interfaces: the
		// verb tells them apart)
		o, ok := a.(interface{ GetObject() runtime.Object })
		if !ok || (a.GetVerb() != "create" && a.GetVerb() != "update") {
			return false, nil, nil
		}
		obj := o.GetObject()
		if a.GetVerb() == "update" {
			m, err := meta.Accessor(obj)
			if err == nil && m.GetResourceVersion() != "" {
				cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName())
				if cm, aerr := meta.Accessor(cur); err == nil && aerr == nil && cm.GetResourceVersion() != m.GetResourceVersion() {
					return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
						errors.New("the object has been modified; please apply your changes to the latest version and try again"))
				}
				// (not found: the tracker answers NotFound itself)
			}
		}
		if m, err := meta.Accessor(obj); err == nil {
			version++
			m.SetResourceVersion(strconv.Itoa(version))
		}
		return false, nil, nil
	})
	return c
}
