package replica

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeCheckpoint(t *testing.T) {
	good := Checkpoint{Epoch: 7, Replica: "a", Object: "e7-g3-5f1c0e2a9b3d4c6e.db", Floor: 120, Regional: 9, Bytes: 155648,
		Digest: "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=", Taken: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}
	raw, _ := json.Marshal(good)
	cases := []struct {
		name string
		raw  string
		want string // "" decodes
	}{
		{"written by an active", string(raw), ""},
		{"claimed, no checkpoint yet", `{"epoch":3,"replica":"b","floor":0,"taken":"2026-12-02T14:00:00Z"}`, ""},
		// an earlier version's: no regional floor (the regional stream is read from its start)
		{"without a regional floor", `{"epoch":3,"replica":"b","object":"e3-g1.db","floor":8,"bytes":10,"taken":"2026-12-02T14:00:00Z"}`, ""},
		// the format before the object names' nonce and the digest
		{"without a digest", `{"epoch":3,"replica":"b","object":"e3-g1.db","floor":8,"regional":2,"bytes":10,"taken":"2026-12-02T14:00:00Z"}`, ""},
		{"digest without object", `{"epoch":3,"digest":"SHA-256=x"}`, "digest"},
		{"no epoch", `{"replica":"b","floor":0,"taken":"2026-12-02T14:00:00Z"}`, "no epoch"},
		{"unknown field", `{"epoch":3,"leader":"b"}`, "unknown field"},
		{"trailing data", `{"epoch":3} {}`, "trailing"},
		{"size without object", `{"epoch":3,"bytes":10}`, "bytes"},
		{"negative size", `{"epoch":3,"object":"x","bytes":-1}`, "bytes"},
		{"not json", `checkpoint`, "invalid"},
		{"too large", `{"epoch":3,"replica":"` + strings.Repeat("x", maxPointerBytes) + `"}`, "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodeCheckpoint([]byte(tc.raw))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if tc.raw == string(raw) && p != good {
					t.Fatalf("got %+v, want %+v", p, good)
				}
				return
			}
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrCheckpoint naming %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeCheckpoint: any bytes decode to a valid pointer or
// ErrCheckpoint, never a panic, and a decoded pointer encodes and
// decodes to itself.
func FuzzDecodeCheckpoint(f *testing.F) {
	raw, _ := json.Marshal(Checkpoint{Epoch: 7, Replica: "a", Object: "e7-g3.db", Floor: 120, Bytes: 155648, Taken: time.Unix(1_800_000_000, 0).UTC()})
	f.Add(raw)
	f.Add([]byte(`{"epoch":3,"replica":"b","floor":0,"taken":"2026-12-02T14:00:00Z"}`))
	f.Add([]byte(`{"epoch":4,"replica":"a","object":"e4-g2.db","floor":10,"regional":3,"bytes":9,"taken":"2026-12-02T14:00:00Z"}`))
	f.Add([]byte(`{"epoch":4,"replica":"a","object":"e4-g2-00ff.db","floor":10,"bytes":9,"digest":"SHA-256=abc","taken":"2026-12-02T14:00:00Z"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("error %v is not ErrCheckpoint", err)
			}
			return
		}
		again, _ := json.Marshal(p)
		q, err := DecodeCheckpoint(again)
		if err != nil || !q.Taken.Equal(p.Taken) || q.Epoch != p.Epoch || q.Object != p.Object || q.Floor != p.Floor || q.Regional != p.Regional || q.Bytes != p.Bytes || q.Digest != p.Digest || q.Replica != p.Replica {
			t.Fatalf("%+v re-encoded decodes to %+v, %v", p, q, err)
		}
	})
}
