package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
)

// FuzzDecodeStoredUpdate: no input crashes the stored-update decoder; an
// accepted record re-encodes to the same bytes. Seeded with a real
// record.
func FuzzDecodeStoredUpdate(f *testing.F) {
	h := federated.UpdateHeader{Site: "site-a", Seq: 3, Round: 2, BaseModel: "ab" + string(bytes.Repeat([]byte("cd"), 31)), BaseVersion: 1, Samples: 10}
	rec, err := EncodeStoredUpdate(&h, []byte("ESU1 payload"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rec)
	f.Add(rec[:len(rec)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStoredUpdate(b, "fuzz")
		if err != nil {
			return
		}
		again, err := EncodeStoredUpdate(&federated.UpdateHeader{Site: s.Site, Seq: s.Seq, Round: s.Round, BaseModel: s.BaseModel,
			BaseVersion: s.BaseVersion, Samples: s.Samples}, s.Payload)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted record does not re-encode to itself: %v", err)
		}
	})
}

// FuzzDecodeRecord: no input crashes the record decoder; an accepted
// round record re-encodes to a record that decodes to the same round.
// Seeded with a real round record.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := Round{Round: 2, Mode: federated.Sync, State: StateCollecting, BaseModel: string(bytes.Repeat([]byte("a"), 64)), BaseVersion: 1,
		Opened: now, Deadline: now.Add(time.Minute), MinUpdates: 1, Expected: []string{"site-a"}, Local: federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 0.001},
		MaxNorm: 1000, ClipNorm: 10}
	raw, err := EncodeRecord(&r)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Round
		if err := DecodeRecord(b, &got, "fuzz"); err != nil {
			return
		}
		again, err := EncodeRecord(&got)
		if err != nil {
			t.Fatal(err)
		}
		var back Round
		if err := DecodeRecord(again, &back, "again"); err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
	})
}
