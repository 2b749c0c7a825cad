package esu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

// resealed is b with its trailing CRC-32 recomputed over the rest, so
// that fuzzed framing and values reach the checks behind the checksum.
func resealed(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// FuzzCheckView: CheckView, what the coordinator judges and sums an
// update with without decoding it, agrees with Decode on every input (as
// it is and resealed): both accept or both refuse (wrapping ErrUpdate),
// and on an accepted update the Info and the View give exactly Decode's
// values (int8 chunks times their scale, or the float32 values), its
// base, count and L2 norm, within maxValues; ViewOf accepts it too.
// Seeded with real updates of both encodings and several chunk sizes.
func FuzzCheckView(f *testing.F) {
	for _, opt := range []Options{DefaultOptions(1), {Encoding: Int8, ChunkSize: 7, Seed: 2}, {Encoding: Int8, ChunkSize: 1, Seed: 3}, {Encoding: Float32}} {
		b, err := Encode(&Update{Base: testBase, Values: randomDelta(40, 3)}, opt)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(0))
		f.Add(b, uint16(39))
	}
	f.Fuzz(func(t *testing.T, in []byte, maxValues uint16) {
		for _, b := range [][]byte{in, resealed(in)} {
			u, derr := Decode(b, int(maxValues))
			info, v, cerr := CheckView(b, int(maxValues))
			if (derr == nil) != (cerr == nil) {
				t.Fatalf("Decode: %v; CheckView: %v", derr, cerr)
			}
			if cerr != nil {
				if v != nil || !errors.Is(cerr, ErrUpdate) || !errors.Is(derr, ErrUpdate) {
					t.Fatalf("refusals %v / %v do not wrap ErrUpdate, or returned a view", derr, cerr)
				}
				continue
			}
			if maxValues > 0 && len(u.Values) > int(maxValues) {
				t.Fatalf("%d values accepted for at most %d", len(u.Values), maxValues)
			}
			if info.Values != len(u.Values) || v.Len() != len(u.Values) || info.Base != u.Base || info.Encoding != u.Encoding || v.Encoding() != u.Encoding ||
				!closeNorm(info.Norm, l2(u.Values)) {
				t.Fatalf("CheckView %+v (view of %d) disagrees with Decode (%d values, norm %v)", info, v.Len(), len(u.Values), l2(u.Values))
			}
			got := make([]float32, 0, len(u.Values))
			if v.Encoding() == Int8 {
				for j := range v.Chunks() {
					scale, q := v.Int8Chunk(j)
					for _, x := range q {
						got = append(got, float32(int8(x))*scale)
					}
				}
			} else {
				for i := range v.Len() {
					got = append(got, v.Float32(i))
				}
			}
			if len(got) != len(u.Values) {
				t.Fatalf("the view holds %d values, Decode %d", len(got), len(u.Values))
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(u.Values[i]) {
					t.Fatalf("value %d: view %v, Decode %v", i, got[i], u.Values[i])
				}
			}
			if _, err := ViewOf(b, int(maxValues)); err != nil {
				t.Fatalf("ViewOf refuses what CheckView accepted: %v", err)
			}
		}
	})
}
