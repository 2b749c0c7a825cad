package flclient

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// TestFetchFailuresAreRetried: what a site could not fetch (the objects a
// notice or a round names are not in the object store yet, as when a
// fetch times out on a loaded link) is fetched again with backoff once
// they are there. A model notice: the model installs, and its fetch
// failure is counted once, not once per retry. A synchronous round: the
// site trains for it and queues its update (before the fix it waited for
// the next announcement, and the round for its deadline).
func TestFetchFailuresAreRetried(t *testing.T) {
	key, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// notify names objects that are not there yet; supply puts them
		notify func(f *feed, fb, qb []byte, fid, qid string)
		supply func(f *feed, fb, qb []byte)
		done   func(s Status) bool
		check  func(t *testing.T, s Status)
	}{
		{
			name: "model notice",
			notify: func(f *feed, fb, qb []byte, fid, qid string) {
				raw, _ := federated.Marshal(federated.ModelNotice{V: federated.ProtocolVersion, Version: 2, Round: 1,
					FloatModel: fid, FloatObject: "late.float32.esa", Int8Model: qid, Int8Object: "late.int8.esa", Published: time.Now().UTC()})
				if _, err := f.kv.Put(context.Background(), federated.KeyModel, raw); err != nil {
					t.Fatal(err)
				}
			},
			supply: func(f *feed, fb, qb []byte) {
				if _, err := f.obj.PutBytes(context.Background(), "late.int8.esa", qb); err != nil {
					t.Fatal(err)
				}
				if _, err := f.obj.PutBytes(context.Background(), "late.float32.esa", fb); err != nil {
					t.Fatal(err)
				}
			},
			done: func(s Status) bool { return s.Installed != nil && s.Installed.Version == 2 },
			check: func(t *testing.T, s Status) {
				if n := s.Counters.RefusedModelReasons[RefuseFetch]; n != 1 || s.Counters.RefusedModels != 1 {
					t.Errorf("refusals %v (%d in all), want one %s refusal for the notice, however many retries", s.Counters.RefusedModelReasons, s.Counters.RefusedModels, RefuseFetch)
				}
			},
		},
		{
			name: "sync round",
			notify: func(f *feed, fb, qb []byte, fid, qid string) {
				raw, _ := federated.Marshal(federated.RoundAnnouncement{V: federated.ProtocolVersion, Round: 1, Mode: federated.Sync,
					BaseModel: fid, BaseObject: "late-base.float32.esa", BaseVersion: 2, Opened: time.Now().UTC(), Deadline: time.Now().Add(time.Hour).UTC(),
					MinUpdates: 1, Local: federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}})
				if _, err := f.kv.Put(context.Background(), federated.KeyRound, raw); err != nil {
					t.Fatal(err)
				}
			},
			supply: func(f *feed, fb, qb []byte) {
				if _, err := f.obj.PutBytes(context.Background(), "late-base.float32.esa", fb); err != nil {
					t.Fatal(err)
				}
			},
			done: func(s Status) bool { return s.Counters.Trained == 1 },
			check: func(t *testing.T, s Status) {
				if s.Counters.RefusedModels != 0 {
					t.Errorf("%d models refused, want none (no notice was sent)", s.Counters.RefusedModels)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t)
			cfg := testConfig(t)
			cfg.ModelKeys = trusting(t, key)
			cfg.StatePoll, cfg.PublishTimeout = 50*time.Millisecond, time.Second
			cfg.BackoffMin, cfg.BackoffMax, cfg.ReportInterval = 10*time.Millisecond, 50*time.Millisecond, 0
			fa, qa := f.artifacts(5, 2, time.Now())
			fb, qb := encodeBoth(t, fa, qa, key)
			base, err := nn.FromArtifact(fa)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Trainer = &SyntheticTrainer{Target: make([]float32, base.Net.NumParams()), Rate: 0.5, Samples: 10}
			r := startClient(t, f, cfg)
			tc.notify(f, fb, qb, fa.Header.ModelID, qa.Header.ModelID)
			// the first attempt fails (nothing to fetch) ...
			waitFor(t, r.c, "a failed fetch", func(s Status) bool {
				return r.c.retries.Load() > 0
			})
			if tc.done(mustStatus(t, r.c)) {
				t.Fatal("done before the objects exist")
			}
			// ... and once the objects are there, a retry succeeds
			tc.supply(f, fb, qb)
			tc.check(t, waitFor(t, r.c, "the retry's success", tc.done))
		})
	}
}

func mustStatus(t *testing.T, c *Client) Status {
	t.Helper()
	s, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
