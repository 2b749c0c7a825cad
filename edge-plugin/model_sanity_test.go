package edgeplugin

import (
	"errors"
	"testing"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/sanity"
)

// TestAbsurdModelRefusedBeforeSwap reproduces finding 6 of issue 21 at
// the scheduler: a validly signed int8 model whose input scales are 1e30
// (every node ties at zero) or whose output scale is 3e38 (every score
// infinite) was swapped in. The store refuses each (reason "sanity",
// sanity.ErrInsane) and keeps the model it runs.
func TestAbsurdModelRefusedBeforeSwap(t *testing.T) {
	key := testSigner(t, 1)
	store := sources.NewModelStore(testKeyring(t, key))
	if ok, err := store.Install(plugintest.Variant(t, key, 5, testArtifact(t).Header.Created, 0)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, tc := range []struct {
		name   string
		tensor string
		value  float32
	}{{"input scales 1e30", "in_scale", 1e30}, {"output scale 3e38", "w3_scale", 3e38}} {
		t.Run(tc.name, func(t *testing.T) {
			base := testArtifact(t)
			a := quant.Artifact{Header: base.Header}
			for _, tn := range base.Tensors {
				c := tn
				c.F32 = append([]float32(nil), tn.F32...)
				if c.Name == tc.tensor {
					for i := range c.F32 {
						c.F32[i] = tc.value
					}
				}
				a.Tensors = append(a.Tensors, c)
			}
			a.Header.Version = 6
			raw, err := a.Encode(key)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := store.Install(raw)
			var re *sources.RefusalError
			if ok || !errors.As(err, &re) || re.Reason != "sanity" || !errors.Is(err, sanity.ErrInsane) {
				t.Fatalf("installed %v, err %v: want a sanity refusal", ok, err)
			}
			if store.Current().Header.Version != 5 {
				t.Fatalf("running version %d, want 5 kept", store.Current().Header.Version)
			}
		})
	}
}
