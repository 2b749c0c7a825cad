package flclient

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgesched/edgesched/quant"
)

// TestAbsurdModelRefused reproduces finding 6 of issue 21: a model signed
// by the trusted key whose int8 scales are absurd installed without a
// warning. Input scales of 1e30 quantize every feature to zero (every node
// ties); an output scale of 3e38 makes every score infinite. Each is
// offered, validly signed, in turn: the client refuses it (reason
// "sanity"), keeps version 2, and still installs a sane version 3.
func TestAbsurdModelRefused(t *testing.T) {
	f := newFeed(t)
	key, _, _ := quant.GenerateKey(rand.NewChaCha8([32]byte{6}))
	cfg := testConfig(t)
	cfg.ModelKeys = trusting(t, key)
	cfg.StatePoll, cfg.ReportInterval = 50*time.Millisecond, 0
	r := startClient(t, f, cfg)
	now := time.Now()
	f.publish(offer{seed: 2, version: 2, created: now, signer: key})
	waitFor(t, r.c, "version 2 installed", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 2 })

	absurd := []struct {
		name   string
		tensor string
		value  float32
	}{
		{"input scales 1e30 (every node ties)", "in_scale", 1e30},
		{"output scale 3e38 (infinite scores)", "w3_scale", 3e38},
	}
	for i, tc := range absurd {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := r.c.Status()
			fa, qa := f.artifacts(uint64(10+i), 3, now)
			for j := range qa.Tensor(tc.tensor).F32 {
				qa.Tensor(tc.tensor).F32[j] = tc.value
			}
			publishSigned(t, f, fa, qa, key, 3)
			st := waitFor(t, r.c, "the absurd model refused", func(s Status) bool {
				return s.Counters.RefusedModels > before.Counters.RefusedModels || (s.Installed != nil && s.Installed.Version == 3)
			})
			if st.Installed == nil || st.Installed.Version != 2 {
				t.Fatalf("installed %+v: a signed model with %s installed, want it refused and version 2 kept", st.Installed, tc.name)
			}
			if st.Counters.RefusedModelReasons["sanity"] <= before.Counters.RefusedModelReasons["sanity"] {
				t.Fatalf("refused for %v (last: %s), want reason sanity", st.Counters.RefusedModelReasons, st.Counters.LastRefusal)
			}
			t.Logf("refused: %s", st.Counters.LastRefusal)
		})
	}
	f.publish(offer{seed: 3, version: 3, created: now, signer: key})
	waitFor(t, r.c, "a sane version 3", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 3 })
}

// encodeBoth signs a model's float and int8 artifacts with key.
func encodeBoth(t *testing.T, fa, qa *quant.Artifact, key *quant.Signer) (fb, qb []byte) {
	t.Helper()
	var err error
	if fb, err = fa.Encode(key); err != nil {
		t.Fatal(err)
	}
	if qb, err = qa.Encode(key); err != nil {
		t.Fatal(err)
	}
	return fb, qb
}

// publishSigned signs and publishes a model's artifacts as version.
func publishSigned(t *testing.T, f *feed, fa, qa *quant.Artifact, key *quant.Signer, version uint64) {
	t.Helper()
	fb, qb := encodeBoth(t, fa, qa, key)
	f.put(fb, qb, version, fa.Header.ModelID, qa.Header.ModelID)
}
