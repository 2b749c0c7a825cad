package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
)

// reseal is b with its trailing CRC-32C recomputed over the rest, as a
// hand-edited or damaged-then-resealed record would have it: fuzzed
// bodies then reach the checks after the checksum.
func reseal(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	b = bytes.Clone(b)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// FuzzDecodeStoredUpdate: no input crashes the stored-update decoder; a
// refusal wraps ErrStore; an accepted record (format 1, with its payload,
// or 2, summed, with its norm) re-encodes to the same bytes. Each input is
// tried as it is and resealed. Seeded with real records of both formats.
func FuzzDecodeStoredUpdate(f *testing.F) {
	h := federated.UpdateHeader{Site: "site-a", Seq: 3, Round: 2, BaseModel: "ab" + string(bytes.Repeat([]byte("cd"), 31)), BaseVersion: 1, Samples: 10}
	rec, err := EncodeStoredUpdate(&h, []byte("ESU1 payload"))
	if err != nil {
		f.Fatal(err)
	}
	summed, err := EncodeSummedUpdate(&h, 0.75)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rec)
	f.Add(rec[:len(rec)-1])
	f.Add(summed)
	f.Add(reseal(append(summed[:len(summed)-12], 0x7f, 0xf8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0))) // a NaN norm
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, raw := range [][]byte{b, reseal(b)} {
			s, err := DecodeStoredUpdate(raw, "fuzz")
			if err != nil {
				if s != nil || !errors.Is(err, ErrStore) {
					t.Fatalf("refusal %v (record %v) does not wrap ErrStore or returned a record", err, s)
				}
				continue
			}
			hdr := federated.UpdateHeader{Site: s.Site, Seq: s.Seq, Round: s.Round, BaseModel: s.BaseModel, BaseVersion: s.BaseVersion, Samples: s.Samples}
			var again []byte
			if s.Summed {
				again, err = EncodeSummedUpdate(&hdr, s.Norm)
			} else {
				again, err = EncodeStoredUpdate(&hdr, s.Payload)
			}
			if err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("accepted record does not re-encode to itself: %v", err)
			}
		}
	})
}

// recordKinds are the JSON record types of the store, by the fuzzer's
// kind byte.
var recordKinds = []func() any{
	func() any { return &Round{} }, func() any { return &Site{} }, func() any { return &Model{} },
	func() any { return &Event{} }, func() any { return &Verdict{} },
}

// FuzzDecodeRecord: no input crashes the record decoder of any record
// type (a round, site, model, audit event or verdict, by kind); a
// refusal wraps ErrStore; an accepted record re-encodes to a record that
// decodes again, and encoding is then a fixed point. Each input is tried
// as it is and resealed, so that fuzzed JSON reaches the strict decoding
// and the range checks. Seeded with a real record of each type.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := string(bytes.Repeat([]byte("a"), 64))
	r := Round{Round: 2, Mode: federated.Sync, State: StateCollecting, BaseModel: base, BaseVersion: 1,
		Opened: now, Deadline: now.Add(time.Minute), MinUpdates: 1, Expected: []string{"site-a"}, Local: federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 0.001},
		MaxNorm: 1000, ClipNorm: 10}
	summing := r
	summing.Round, summing.Mode, summing.State, summing.Accepted, summing.Rejected = 3, federated.Async, StatePublished, 2, map[string]int{"too_large": 1}
	summing.Result, summing.Closed, summing.Stats, summing.Note = 4, now.Add(time.Minute), map[string]float64{"dp_epsilon": 0.5}, "2 updates"
	shift, wshift, ok := federated.FixedShifts(64, 1000, 10)
	if !ok {
		f.Fatal("no shifts")
	}
	summing.Sum = &SumSpec{Rule: federated.RuleFedBuff, Exponent: 0.5, N: 64, MaxWeight: 1000, MaxAbs: 10, Shift: shift, WShift: wshift}
	records := []struct {
		kind uint8
		v    any
	}{
		{0, &r}, {0, &summing},
		{1, &Site{Site: "site-a", HWM: 9, LastSeen: now, LastRound: 3, Accepted: 4, Rejected: map[string]int{"stale": 1}, ModelVersion: 2,
			LastStatus: federated.Rejected, LastReason: "stale", JudgedFrom: 1}},
		{2, &Model{Version: 4, Round: 3, Status: ModelPublished, FloatModel: base, Int8Model: string(bytes.Repeat([]byte("b"), 64)), Parent: base, Created: now, Note: "round 3"}},
		{3, &Event{Seq: 12, Time: now, Kind: "round_published", Round: 3, Site: "site-a", Detail: "model 4"}},
		{4, &Verdict{Status: federated.Duplicate, Reason: "replay", Stream: 77}},
	}
	for _, rec := range records {
		raw, err := EncodeRecord(rec.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec.kind, raw)
		f.Add(rec.kind+1, raw) // as another type
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		newRec := recordKinds[int(kind)%len(recordKinds)]
		decode := func(raw []byte) (any, error) {
			v := newRec()
			if _, ok := v.(*Event); ok { // the audit log's reader
				return DecodeEvent(raw)
			}
			return v, DecodeRecord(raw, v, "fuzz")
		}
		for _, raw := range [][]byte{b, reseal(b)} {
			v, err := decode(raw)
			if err != nil {
				if !errors.Is(err, ErrStore) {
					t.Fatalf("refusal %v does not wrap ErrStore", err)
				}
				continue
			}
			again, err := EncodeRecord(v)
			if err != nil {
				t.Fatalf("accepted %T does not re-encode: %v", v, err)
			}
			back, err := decode(again)
			if err != nil {
				t.Fatalf("re-encoded %T refused: %v\n%s", v, err, again)
			}
			if third, err := EncodeRecord(back); err != nil || !bytes.Equal(third, again) {
				t.Fatalf("encoding is not a fixed point (%v):\n%s\n%s", err, again, third)
			}
		}
	})
}

// FuzzDecodeSum: no input crashes the running sums' decoder; a refusal
// wraps ErrStore; accepted sums re-encode to the same bytes, whether
// decoded into fresh sums or into sums whose slices have room, and are
// refused for another round. Each input is tried as it is and resealed.
// Seeded with real sums.
func FuzzDecodeSum(f *testing.F) {
	shift, wshift, ok := federated.FixedShifts(16, 100, 10)
	if !ok {
		f.Fatal("no shifts")
	}
	empty := federated.NewFixedSum(0, shift, wshift, 1000)
	s := federated.NewFixedSum(5, shift, wshift, 1000)
	s.Hi, s.Lo = []int64{-1, 0, 1, 1 << 40, -(1 << 62)}, []uint64{^uint64(0), 0, 7, 1 << 63, 3}
	s.AddWeight(12, 12, 0)
	s.AddWeight(3, 6, 2)
	for _, x := range []*federated.FixedSum{empty, s} {
		raw := EncodeSum(nil, 7, x)
		f.Add(raw)
		f.Add(raw[:len(raw)-5])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, raw := range [][]byte{b, reseal(b)} {
			var round uint64
			if len(raw) >= 13 {
				round = binary.BigEndian.Uint64(raw[5:]) // the round it holds
			}
			var got federated.FixedSum
			if err := DecodeSum(raw, round, &got, "fuzz"); err != nil {
				if !errors.Is(err, ErrStore) {
					t.Fatalf("refusal %v does not wrap ErrStore", err)
				}
				continue
			}
			if again := EncodeSum(nil, round, &got); !bytes.Equal(again, raw) {
				t.Fatal("accepted sums do not re-encode to themselves")
			}
			roomy := federated.FixedSum{Hi: make([]int64, len(got.Hi)+3), Lo: make([]uint64, len(got.Lo)+3)}
			if err := DecodeSum(raw, round, &roomy, "fuzz"); err != nil || !bytes.Equal(EncodeSum(nil, round, &roomy), raw) {
				t.Fatalf("decoded into sums with room: %v, or re-encodes differently", err)
			}
			if err := DecodeSum(raw, round+1, &got, "fuzz"); !errors.Is(err, ErrStore) {
				t.Fatalf("sums of round %d accepted for round %d: %v", round, round+1, err)
			}
		}
	})
}
