package flclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/quant"
)

func testConfig(t *testing.T) Config {
	t.Helper()
	signer, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{7}))
	if err != nil {
		t.Fatal(err)
	}
	coord, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{8}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Site, cfg.Signer, cfg.DataDir = "store-1", signer, t.TempDir()
	cfg.ModelKeys = &quant.Keyring{}
	if _, err := cfg.ModelKeys.Add(coord.Public()); err != nil {
		t.Fatal(err)
	}
	cfg.Trainer = &SyntheticTrainer{Rate: 1, Samples: 1}
	return cfg
}

// TestOutboxFullPolicies fills a 3-entry outbox with 5 updates (no link,
// so nothing drains): drop-oldest keeps sequences 3..5 and counts 2
// drops; refuse-new keeps 1..3, makes no sequence 4 or 5 and counts 2
// refusals. Both counts survive a reopen of the store.
func TestOutboxFullPolicies(t *testing.T) {
	base := strings.Repeat("ab", 32)
	cases := []struct {
		policy   string
		wantSeqs []uint64
		wantSeq  uint64
	}{
		{DropOldest, []uint64{3, 4, 5}, 5},
		{RefuseNew, []uint64{1, 2, 3}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.OutboxLimit, cfg.OutboxPolicy = 3, tc.policy
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := c.enqueue(context.Background(), uint64(i+1), 1, false, base, 1, 10, []float32{0.5, -0.25, float32(i)}, uint64(i)); err != nil {
					t.Fatal(err)
				}
			}
			var seqs []uint64
			for range 3 {
				seq, msg := c.oldest()
				if msg == nil {
					break
				}
				seqs = append(seqs, seq)
				if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Delete(u64(seq)) }); err != nil {
					t.Fatal(err)
				}
			}
			if len(seqs) != 3 || seqs[0] != tc.wantSeqs[0] || seqs[2] != tc.wantSeqs[2] {
				t.Fatalf("outbox held %v, want %v", seqs, tc.wantSeqs)
			}
			c.Close()
			c, err = New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, err := c.Status()
			if err != nil {
				t.Fatal(err)
			}
			if st.Counters.DroppedFull != 2 || st.Seq != tc.wantSeq {
				t.Fatalf("after reopen: %d dropped, seq %d; want 2 and %d", st.Counters.DroppedFull, st.Seq, tc.wantSeq)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"site", func(c *Config) { c.Site = "Store_1" }, "Site"},
		{"signer", func(c *Config) { c.Signer = nil }, "Signer"},
		{"model keys", func(c *Config) { c.ModelKeys = &quant.Keyring{} }, "ModelKeys"},
		{"data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"trainer", func(c *Config) { c.Trainer = nil }, "Trainer"},
		{"outbox limit", func(c *Config) { c.OutboxLimit = 0 }, "OutboxLimit"},
		{"outbox policy", func(c *Config) { c.OutboxPolicy = "keep-all" }, "OutboxPolicy"},
		{"chunk", func(c *Config) { c.ChunkSize = 0 }, "ChunkSize"},
		{"backoff", func(c *Config) { c.BackoffMax = c.BackoffMin / 2 }, "backoff"},
		{"report interval", func(c *Config) { c.ReportInterval = -1 }, "backoff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %s", err, tc.want)
			}
		})
	}
	c := testConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
