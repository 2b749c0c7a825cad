package region

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
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
		v := make([]float32, dims)
		for j := range v {
			v[j] = 0.01 * float32(j%7)
		}
		payload, err := esu.Encode(&esu.Update{Base: baseModel, Values: v}, esu.DefaultOptions(seq))
		if err != nil {
			t.Fatal(err)
		}
		b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: rnd, BaseModel: baseModel, BaseVersion: 1,
			Samples: samples, Created: time.Unix(0, 0).UTC()}, payload, signer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	other := strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name    string
		data    []byte
		status  federated.AckStatus // "": not attributable
		reason  string
		counted int
	}{
		{"a future round", msg("s1", 1, 3, base, 10, keys["s1"]), federated.Rejected, federated.ReasonFutureRound, 0},
		{"another base model", msg("s1", 2, 2, other, 10, keys["s1"]), federated.Rejected, federated.ReasonBaseModel, 0},
		{"too heavy", msg("s1", 3, 2, base, 5000, keys["s1"]), federated.Rejected, federated.ReasonTooHeavy, 0},
		{"signed by another site's key", msg("s1", 4, 2, base, 10, keys["s2"]), "", "", 0},
		// s1's mark is 3 (the rows above): 2^32 + 2 above it is refused
		// and leaves the mark, so 5 is accepted next
		{"a sequence too far ahead", msg("s1", 3+federated.MaxSeqJump+2, 2, base, 10, keys["s1"]), federated.Rejected, federated.ReasonSeqJump, 0},
		{"accepted", msg("s1", 5, 2, base, 10, keys["s1"]), federated.Accepted, "", 1},
		{"the same again", msg("s1", 5, 2, base, 10, keys["s1"]), federated.Accepted, "", 1},
		{"an older sequence", msg("s1", 4, 2, base, 10, keys["s1"]), federated.Duplicate, federated.ReasonReplay, 1},
		{"a second update in the round", msg("s1", 6, 2, base, 10, keys["s1"]), federated.Rejected, federated.ReasonReplay, 1},
		{"the second site", msg("s2", 1, 2, base, 20, keys["s2"]), federated.Accepted, "", 2},
	} {
		ack, err := g.Process(federated.UpdateSubjectPrefix+"s1", tc.data)
		if tc.name == "the second site" {
			ack, err = g.Process(federated.UpdateSubjectPrefix+"s2", tc.data)
		}
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
	if ack, _ := g.Process("", msg("s2", 2, 2, base, 30, keys["s2"])); ack.Reason != federated.ReasonRoundClosed {
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
