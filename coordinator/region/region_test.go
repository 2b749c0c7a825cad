package region

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

func TestConfigValidate(t *testing.T) {
	reg := &federated.Registry{}
	if err := reg.Add("s1", key(t, 1).Public()); err != nil {
		t.Fatal(err)
	}
	good := DefaultConfig()
	good.Region, good.DataDir, good.Sites, good.Signer = "eu", t.TempDir(), reg, key(t, 9)
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"good", func(*Config) {}, ""},
		{"region", func(c *Config) { c.Region = "EU" }, "Region"},
		{"data", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"sites", func(c *Config) { c.Sites = &federated.Registry{} }, "Sites"},
		{"signer", func(c *Config) { c.Signer = nil }, "Signer"},
		{"poll", func(c *Config) { c.PollInterval = 0 }, "Lead/PollInterval"},
		{"batch", func(c *Config) { c.Batch = 0 }, "Batch/Verifiers"},
		{"in-flight bytes", func(c *Config) { c.MaxInflightBytes = -1 }, "MaxInflightBytes"},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if tc.field == "" && err != nil || tc.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(fmt.Sprint(err), tc.field+":")) {
			t.Errorf("%s: %v, want field %q", tc.name, err, tc.field)
		}
	}
}

// TestVerdicts: the region judges its sites' updates as the root does
// (a table of one site's messages, in order), counts each once, seals
// when its last site contributed, and keeps all of it across a restart.
func TestVerdicts(t *testing.T) {
	const dims = 64
	reg, keys := testSites(t, "s1", "s2", "s3")
	round, base := summingRound(t)
	cfg := DefaultConfig()
	cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer = "eu", t.TempDir(), reg, key(t, 9)
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(&coordinator.RegionalRound{Round: round, Dims: dims}); err != nil {
		t.Fatal(err)
	}
	msg := func(site string, seq, rnd uint64, baseModel string, samples int64, signer *quant.Signer) []byte {
		return updateMsg(t, site, seq, rnd, baseModel, samples, dims, signer)
	}
	other := strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name    string
		site    string // the subject's
		data    []byte
		status  federated.AckStatus // "": not attributable
		reason  string
		counted int
	}{
		{"a future round", "s1", msg("s1", 1, 3, base, 10, keys["s1"]), federated.Rejected, federated.ReasonFutureRound, 0},
		{"another base model", "s1", msg("s1", 2, 2, other, 10, keys["s1"]), federated.Rejected, federated.ReasonBaseModel, 0},
		{"too heavy", "s1", msg("s1", 3, 2, base, 5000, keys["s1"]), federated.Rejected, federated.ReasonTooHeavy, 0},
		{"signed by another site's key", "s1", msg("s1", 4, 2, base, 10, keys["s2"]), "", "", 0},
		// s1's mark is 3 (the rows above): 2^32 + 2 above it is refused
		// and leaves the mark, so 5 is accepted next
		{"a sequence too far ahead", "s1", msg("s1", 3+federated.MaxSeqJump+2, 2, base, 10, keys["s1"]), federated.Rejected, federated.ReasonSeqJump, 0},
		{"accepted", "s1", msg("s1", 5, 2, base, 10, keys["s1"]), federated.Accepted, "", 1},
		{"the same again", "s1", msg("s1", 5, 2, base, 10, keys["s1"]), federated.Accepted, "", 1},
		{"an older sequence judged before", "s1", msg("s1", 3, 2, base, 10, keys["s1"]), federated.Duplicate, federated.ReasonReplay, 1},
		// 4 is below the mark but never judged (the row signed by s2's key
		// was not s1's): a late update, judged; s1 counts in the round
		// already
		{"a late sequence", "s1", msg("s1", 4, 2, base, 10, keys["s1"]), federated.Rejected, federated.ReasonReplay, 1},
		{"the late sequence again", "s1", msg("s1", 4, 2, base, 10, keys["s1"]), federated.Duplicate, federated.ReasonReplay, 1},
		{"a second update in the round", "s1", msg("s1", 6, 2, base, 10, keys["s1"]), federated.Rejected, federated.ReasonReplay, 1},
		// s2's newer update goes out before its older one (an agent that
		// adopted an old leader's update after its own): the older one
		// is judged and counted, not refused as a replay
		{"the second site's newer update first", "s2", msg("s2", 3, 2, other, 20, keys["s2"]), federated.Rejected, federated.ReasonBaseModel, 1},
		{"its older update after it", "s2", msg("s2", 2, 2, base, 20, keys["s2"]), federated.Accepted, "", 2},
		{"the older update again", "s2", msg("s2", 2, 2, base, 20, keys["s2"]), federated.Accepted, "", 2},
	} {
		ack, err := g.Process(federated.UpdateSubjectPrefix+tc.site, tc.data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _, counted := g.Current()
		switch {
		case tc.status == "" && ack != nil:
			t.Errorf("%s: ack %+v, want none", tc.name, ack)
		case tc.status != "" && (ack == nil || ack.Status != tc.status || ack.Reason != tc.reason):
			t.Errorf("%s: ack %+v, want %s %s", tc.name, ack, tc.status, tc.reason)
		case ack != nil && tc.status == federated.Duplicate && ack.HWM != 5:
			// a replay tells the site how far it had come (s1's newest: 5)
			t.Errorf("%s: ack %+v, want the high-water mark 5", tc.name, ack)
		case ack != nil && tc.status != federated.Duplicate && ack.HWM != 0:
			t.Errorf("%s: ack %+v with a high-water mark, want none (only a replay's has one)", tc.name, ack)
		case counted != tc.counted:
			t.Errorf("%s: %d counted, want %d", tc.name, counted, tc.counted)
		}
	}
	if ack, err := g.Process("", msg("s3", 1, 2, base, 30, keys["s3"])); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("last site: %+v %v", ack, err)
	}
	if n, sealed, _ := g.Current(); n != 2 || !sealed {
		t.Fatalf("after the last site: round %d sealed %v, want 2 sealed", n, sealed)
	}
	if ack, _ := g.Process("", msg("s2", 4, 2, base, 30, keys["s2"])); ack.Reason != federated.ReasonRoundClosed {
		t.Fatalf("after sealing: %+v, want round_closed", ack)
	}
	g.Close()
	if g, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out, _ := g.Outbox()
	n, sealed, counted := g.Current()
	if !slices.Equal(out, []uint64{2}) || n != 2 || !sealed || counted != 3 {
		t.Fatalf("after a restart: outbox %v, round %d sealed %v counted %d; want [2], 2, true, 3", out, n, sealed, counted)
	}
	// the verdicts are kept: s1's late update is a replay, not judged again
	if ack, err := g.Process("", msg("s1", 4, 2, base, 10, keys["s1"])); err != nil || ack.Status != federated.Duplicate {
		t.Fatalf("s1's late update after a restart: %+v %v, want duplicate", ack, err)
	}
	// the next round: round 2's sums and list go, its sealed aggregate
	// stays in the outbox until forwarded; round 2's update delivered
	// again is a replay
	next := *round
	next.Round = 3
	if err := g.Open(&coordinator.RegionalRound{Round: &next, Dims: dims}); err != nil {
		t.Fatal(err)
	}
	out, _ = g.Outbox()
	n, sealed, counted = g.Current()
	if !slices.Equal(out, []uint64{2}) || n != 3 || sealed || counted != 0 {
		t.Fatalf("round 3: outbox %v, round %d sealed %v counted %d; want [2], 3, false, 0", out, n, sealed, counted)
	}
	if ack, err := g.Process("", msg("s3", 1, 2, base, 30, keys["s3"])); err != nil || ack.Status != federated.Duplicate {
		t.Fatalf("round 2's update again in round 3: %+v %v, want duplicate", ack, err)
	}
}

// TestVerdictsFromAnOlderStore: a region store written before verdicts
// were kept holds a site's mark alone; its updates at or below that mark
// stay replays (they may have been judged), the ones above it are judged
// and keep their verdicts, so a late one among them is judged after.
func TestVerdictsFromAnOlderStore(t *testing.T) {
	const dims = 64
	reg, keys := testSites(t, "s1", "s2")
	round, base := summingRound(t)
	g := newAggregator(t, reg)
	if err := g.Open(&coordinator.RegionalRound{Round: round, Dims: dims}); err != nil {
		t.Fatal(err)
	}
	// s1's mark 5, as the older layout left it (no judgedfrom, no verdicts)
	if err := g.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketHWM).Put([]byte("s1"), u64(5)) }); err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name   string
		seq    uint64
		base   string
		status federated.AckStatus
		reason string
	}{
		{"below the old mark", 3, base, federated.Duplicate, federated.ReasonReplay},
		{"at the old mark", 5, base, federated.Duplicate, federated.ReasonReplay},
		{"above it, a newer one first", 7, other, federated.Rejected, federated.ReasonBaseModel},
		{"a late one above the old mark", 6, base, federated.Accepted, ""},
		{"below the old mark still", 4, base, federated.Duplicate, federated.ReasonReplay},
	} {
		ack, err := g.Process("", updateMsg(t, "s1", tc.seq, 2, tc.base, 10, dims, keys["s1"]))
		if err != nil || ack == nil || ack.Status != tc.status || ack.Reason != tc.reason {
			t.Errorf("%s (seq %d): %+v %v, want %s %s", tc.name, tc.seq, ack, err, tc.status, tc.reason)
		}
	}
}
