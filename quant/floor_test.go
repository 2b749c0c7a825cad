package quant

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oldFloorRecords are the records the code before Floor wrote
// (testdata/README.md), with what each holds.
var oldFloorRecords = []struct {
	file string
	want Floor
	// same: the record is already in Floor's spelling, so Encode gives
	// back the very bytes
	same bool
}{
	{"floor-plugin.json", Floor{Version: 7, ModelID: "68279a9a621f3ca07c89c90ece37e759d2a238d09a5cf1bf1db0468d54caae33",
		Accepted: time.Date(2026, 11, 30, 11, 0, 0, 123456789, time.UTC)}, true},
	{"mark-agent-hwm.json", Floor{Version: 9, ModelID: strings.Repeat("8e", 32)}, false},
	{"mark-agent-announced.json", Floor{Version: 11, Accepted: time.Date(2026, 11, 30, 11, 0, 0, 987654321, time.UTC)}, false},
}

func readOldFloor(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameFloor(a, b Floor) bool {
	return a.Version == b.Version && a.ModelID == b.ModelID && a.Accepted.Equal(b.Accepted)
}

// TestDecodeFloorOldShapes: the records the plugin (modelFloor) and the
// agent (modelMark) wrote before Floor still decode, to the values they
// were written with; encoded again they decode to the same values, and
// the plugin's record comes back byte for byte.
func TestDecodeFloorOldShapes(t *testing.T) {
	for _, tc := range oldFloorRecords {
		t.Run(tc.file, func(t *testing.T) {
			raw := readOldFloor(t, tc.file)
			got, err := DecodeFloor(raw)
			if err != nil {
				t.Fatalf("DecodeFloor(%s): %v", raw, err)
			}
			if !sameFloor(got, tc.want) {
				t.Fatalf("DecodeFloor(%s) = %+v, want %+v", raw, got, tc.want)
			}
			enc, err := got.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if tc.same && !bytes.Equal(enc, raw) {
				t.Errorf("encoded again: %s, was %s", enc, raw)
			}
			again, err := DecodeFloor(enc)
			if err != nil || !sameFloor(again, got) {
				t.Errorf("DecodeFloor(%s) = %+v, %v; want %+v", enc, again, err, got)
			}
		})
	}
}

// TestDecodeFloorRefusals: every malformed record is ErrFloor.
func TestDecodeFloorRefusals(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, raw, why string
	}{
		{"empty", ``, "EOF"},
		{"not JSON", `version 3`, "invalid character"},
		{"null", `null`, "no version"},
		{"an array", `[3]`, "cannot unmarshal"},
		{"no version", `{"model_id":"` + id + `"}`, "no version"},
		{"negative version", `{"version":-1}`, "cannot unmarshal"},
		{"unknown field", `{"version":3,"model":"` + id + `"}`, "unknown field"},
		{"second record", `{"version":3}{"version":4}`, "trailing data"},
		{"stray brace", `{"version":3}}`, "trailing data"},
		{"both ID spellings", `{"version":3,"model_id":"` + id + `","int8_model":"` + id + `"}`, "both model_id and int8_model"},
		{"both time spellings", `{"version":3,"accepted":"2026-11-30T11:00:00Z","seen":"2026-11-30T11:00:00Z"}`, "both accepted and seen"},
		{"bad time", `{"version":3,"accepted":"yesterday"}`, "cannot parse"},
		{"too long", `{"version":3,"model_id":"` + strings.Repeat("a", MaxFloorBytes) + `"}`, "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeFloor([]byte(tc.raw))
			if !errors.Is(err, ErrFloor) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("DecodeFloor(%.60s) = %+v, %v; want ErrFloor saying %q", tc.raw, f, err, tc.why)
			}
		})
	}
	if _, err := (Floor{Version: 1, ModelID: strings.Repeat("a", MaxFloorBytes)}).Encode(); !errors.Is(err, ErrFloor) {
		t.Fatalf("Encode of a record over the limit: %v, want ErrFloor", err)
	}
}

// FuzzDecodeFloor: the decoder never panics, and what it accepts encodes
// (within MaxFloorBytes) to a record it decodes to the same values.
// Seeded with the records the old code wrote.
func FuzzDecodeFloor(f *testing.F) {
	for _, tc := range oldFloorRecords {
		f.Add(readOldFloor(f, tc.file))
	}
	f.Add([]byte(`{"version":0}`))
	f.Add([]byte(`{"version":3,"int8_model":"x","accepted":"2026-11-30T11:00:00+01:00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeFloor(b)
		if err != nil {
			if !errors.Is(err, ErrFloor) {
				t.Fatalf("DecodeFloor: %v, not ErrFloor", err)
			}
			return
		}
		enc, err := got.Encode()
		if err != nil {
			if !errors.Is(err, ErrFloor) {
				t.Fatalf("Encode(%+v): %v, not ErrFloor", got, err)
			}
			return // e.g. escaping made it longer than the limit
		}
		again, err := DecodeFloor(enc)
		if err != nil || !sameFloor(again, got) {
			t.Fatalf("%s decoded to %+v, encoded as %s, decoded again to %+v, %v", b, got, enc, again, err)
		}
	})
}
