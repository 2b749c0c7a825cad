package esu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const testBase = "55d223a22dc037138a593bd99c6b5490256007c06af1e7c122c912b8f86a0c7b"

func randomDelta(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 6))
	v := make([]float32, n)
	for i := range v {
		// layers of different magnitude, like a real update
		v[i] = float32(rng.NormFloat64() * math.Pow(10, -float64(1+i*3/n)))
	}
	return v
}

func TestUpdateRoundTrip(t *testing.T) {
	// 4,066 values: the default network's parameter count.
	vals := randomDelta(4066, 1)
	f, err := Encode(&Update{Base: testBase, Values: vals}, Options{Encoding: Float32})
	if err != nil {
		t.Fatal(err)
	}
	q, err := Encode(&Update{Base: testBase, Values: vals}, DefaultOptions(7))
	if err != nil {
		t.Fatal(err)
	}
	// Sizes: header 44 + CRC 4; float32 4 x 4066; int8 4066 + 4 x ceil(4066/512) = 8 scales.
	if len(f) != 48+4*4066 || len(q) != 48+4066+4*8 {
		t.Fatalf("sizes %d and %d", len(f), len(q))
	}
	t.Logf("int8 update is %.3fx smaller than float32 (%d vs %d bytes)", float64(len(f))/float64(len(q)), len(q), len(f))
	fd, err := Decode(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if fd.Values[i] != vals[i] {
			t.Fatalf("float32 value %d: %v != %v", i, fd.Values[i], vals[i])
		}
	}
	qd, err := Decode(q, 4066)
	if err != nil {
		t.Fatal(err)
	}
	if qd.Base != testBase || qd.Encoding != Int8 {
		t.Fatalf("header %s %v", qd.Base, qd.Encoding)
	}
	// Stochastic rounding moves a value by less than one step of its chunk.
	for lo := 0; lo < len(vals); lo += DefaultChunkSize {
		hi := min(lo+DefaultChunkSize, len(vals))
		var mx float64
		for _, v := range vals[lo:hi] {
			mx = math.Max(mx, math.Abs(float64(v)))
		}
		step := mx / 127
		for i := lo; i < hi; i++ {
			if d := math.Abs(float64(qd.Values[i] - vals[i])); d > step*1.0001 {
				t.Fatalf("value %d: %v decoded as %v (step %v)", i, vals[i], qd.Values[i], step)
			}
		}
	}
	// The seed makes the bytes reproducible; another seed rounds otherwise.
	again, _ := Encode(&Update{Base: testBase, Values: vals}, DefaultOptions(7))
	other, _ := Encode(&Update{Base: testBase, Values: vals}, DefaultOptions(8))
	if !bytes.Equal(q, again) || bytes.Equal(q, other) {
		t.Fatal("encoding is not a function of the seed")
	}
	// A zero chunk encodes with scale 0 and decodes to zeros.
	z, err := Encode(&Update{Base: testBase, Values: make([]float32, 10)}, DefaultOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	if zd, err := Decode(z, 0); err != nil || zd.Values[3] != 0 {
		t.Fatalf("zero update: %v", err)
	}
}

// TestStochasticRoundingIsUnbiased: averaged over many seeds, the decoded
// value converges to the true one. For each value the rounding error is
// a scaled Bernoulli with variance at most step^2/4, so the mean of n
// encodings is within 5 step/(2 sqrt(n)) with overwhelming probability
// (and the bound is checked for every one of the 64 values). Nearest
// rounding would miss by up to half a step for ever.
func TestStochasticRoundingIsUnbiased(t *testing.T) {
	vals := make([]float32, 64)
	vals[0] = 1 // fixes the chunk's step at 1/127
	for i := 1; i < len(vals); i++ {
		vals[i] = float32(i) * 0.3 / 127 // 0.3 steps apart: far from the grid
	}
	step := 1.0 / 127
	const n = 4000
	sums := make([]float64, len(vals))
	for seed := range uint64(n) {
		b, err := Encode(&Update{Base: testBase, Values: vals}, Options{Encoding: Int8, ChunkSize: 64, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		u, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range u.Values {
			sums[i] += float64(v)
		}
	}
	bound := 5 * step / (2 * math.Sqrt(n))
	for i, v := range vals {
		if d := math.Abs(sums[i]/n - float64(v)); d > bound {
			t.Errorf("value %d (%v): mean of %d decodings is off by %v > %v", i, v, n, d, bound)
		}
	}
}

func TestUpdateRefusals(t *testing.T) {
	good, err := Encode(&Update{Base: testBase, Values: randomDelta(100, 2)}, DefaultOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
		return b
	}
	edit := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return reseal(b) }
	for _, tc := range []struct {
		name string
		b    []byte
		max  int
		want string
	}{
		{"empty", nil, 0, "magic"},
		{"wrong magic", append([]byte("ESA1"), good[4:]...), 0, "magic"},
		{"future format", edit(func(b []byte) { b[4] = 2 }), 0, "format version 2"},
		{"unknown encoding", edit(func(b []byte) { b[5] = 9 }), 0, "unknown encoding 9"},
		{"chunk size zero", edit(func(b []byte) { b[6], b[7] = 0, 0 }), 0, "chunk size 0"},
		{"more values than the receiver takes", good, 50, "takes 1..50"},
		{"declared count too large", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[40:], 1<<30) }), 0, "values"},
		{"truncated", good[:len(good)-7], 0, "need"},
		{"flipped bit", func() []byte { b := append([]byte(nil), good...); b[60] ^= 4; return b }(), 0, "checksum"},
		{"negative scale", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[44:], math.Float32bits(-1)) }), 0, "scale"},
		{"NaN scale", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[44:], math.Float32bits(float32(math.NaN()))) }), 0, "scale"},
		{"-128", edit(func(b []byte) { b[48] = 0x80 }), 0, "-128"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b, tc.max)
			if !errors.Is(err, ErrUpdate) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrUpdate naming %q", err, tc.want)
			}
			// Check refuses exactly what Decode refuses
			if _, err := Check(tc.b, tc.max); !errors.Is(err, ErrUpdate) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: err %v, want ErrUpdate naming %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		u    Update
		opt  Options
		want string
	}{
		{"NaN value", Update{Base: testBase, Values: []float32{1, float32(math.NaN())}}, DefaultOptions(1), "value 1 is NaN"},
		{"Inf value", Update{Base: testBase, Values: []float32{float32(math.Inf(1))}}, Options{Encoding: Float32}, "+Inf"},
		{"no values", Update{Base: testBase}, DefaultOptions(1), "0 values"},
		{"bad base", Update{Base: "abc", Values: []float32{1}}, DefaultOptions(1), "model ID"},
		{"bad chunk", Update{Base: testBase, Values: []float32{1}}, Options{Encoding: Int8, ChunkSize: 0}, "chunk size 0"},
		{"bad encoding", Update{Base: testBase, Values: []float32{1}}, Options{Encoding: 7}, "encoding"},
	} {
		t.Run("encode "+tc.name, func(t *testing.T) {
			if _, err := Encode(&tc.u, tc.opt); !errors.Is(err, ErrUpdate) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrUpdate naming %q", err, tc.want)
			}
		})
	}
}

// TestCheckUpdateNorm: Check's norm of an int8 update (from the
// integers and the chunk scales) and of a float32 one equals the L2 norm
// of the values Decode returns, to float64 rounding; DecodeInto
// decodes into the buffer it is given.
func TestCheckUpdateNorm(t *testing.T) {
	for _, opt := range []Options{DefaultOptions(5), {Encoding: Int8, ChunkSize: 3, Seed: 1}, {Encoding: Float32}} {
		b, err := Encode(&Update{Base: testBase, Values: randomDelta(1000, 4)}, opt)
		if err != nil {
			t.Fatal(err)
		}
		u, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		info, err := Check(b, 0)
		if err != nil || info.Values != 1000 || info.Encoding != opt.Encoding || info.Base != testBase {
			t.Fatalf("%v: %+v %v", opt.Encoding, info, err)
		}
		if want := l2(u.Values); !closeNorm(info.Norm, want) {
			t.Fatalf("%v: norm %v, the decoded values' %v", opt.Encoding, info.Norm, want)
		}
		buf := make([]float32, 2000)
		v, err := DecodeInto(b, 0, buf)
		if err != nil || &v.Values[0] != &buf[0] || len(v.Values) != 1000 || v.Values[999] != u.Values[999] {
			t.Fatalf("DecodeInto did not decode into the buffer: %v", err)
		}
	}
}

func l2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func closeNorm(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, b) }

// FuzzDecodeUpdate: no input crashes the decoder; an accepted update holds
// only finite values and re-encodes (float32) to what it decoded.
func FuzzDecodeUpdate(f *testing.F) {
	for _, opt := range []Options{DefaultOptions(1), {Encoding: Int8, ChunkSize: 7, Seed: 2}, {Encoding: Float32}} {
		b, err := Encode(&Update{Base: testBase, Values: randomDelta(40, 3)}, opt)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := Decode(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrUpdate) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		for i, v := range u.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("value %d is %v", i, v)
			}
		}
		info, err := Check(b, 1<<16)
		if err != nil || info.Values != len(u.Values) || info.Base != u.Base || !closeNorm(info.Norm, l2(u.Values)) {
			t.Fatalf("Check %+v %v disagrees with Decode (%d values, norm %v)", info, err, len(u.Values), l2(u.Values))
		}
		again, err := Encode(u, Options{Encoding: Float32})
		if err != nil {
			t.Fatalf("accepted update does not re-encode: %v", err)
		}
		back, err := Decode(again, 1<<16)
		if err != nil || len(back.Values) != len(u.Values) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestResidualCarriesTheError: with error feedback the sum of what was
// sent over many rounds tracks the sum of the true deltas to within one
// quantization step (the residual), whereas independent rounding drifts
// like a random walk.
func TestResidualCarriesTheError(t *testing.T) {
	const rounds, n = 200, 300
	var r Residual
	trueSum := make([]float64, n)
	sentSum := make([]float64, n)
	plainSum := make([]float64, n)
	for round := range rounds {
		d := randomDelta(n, uint64(round))
		opt := Options{Encoding: Int8, ChunkSize: 64, Seed: uint64(round)}
		b, err := r.Encode(&Update{Base: testBase, Values: d}, opt)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := Decode(b, 0)
		pb, _ := Encode(&Update{Base: testBase, Values: d}, opt)
		p, _ := Decode(pb, 0)
		for i := range d {
			trueSum[i] += float64(d[i])
			sentSum[i] += float64(u.Values[i])
			plainSum[i] += float64(p.Values[i])
		}
	}
	var efErr, plainErr float64
	for i := range trueSum {
		// with feedback: true - sent is exactly the residual left
		if d := math.Abs(trueSum[i] - sentSum[i] - float64(r.Values()[i])); d > 1e-3 {
			t.Fatalf("value %d: true %v, sent %v, residual %v", i, trueSum[i], sentSum[i], r.Values()[i])
		}
		efErr += math.Abs(trueSum[i] - sentSum[i])
		plainErr += math.Abs(trueSum[i] - plainSum[i])
	}
	t.Logf("mean |error| of the summed updates over %d rounds: %.2e with error feedback, %.2e without", rounds, efErr/n, plainErr/n)
	if efErr*3 > plainErr {
		t.Fatalf("error feedback %.3g is not well below plain rounding %.3g", efErr, plainErr)
	}
	if _, err := r.Encode(&Update{Base: testBase, Values: make([]float32, 7)}, DefaultOptions(1)); !errors.Is(err, ErrUpdate) {
		t.Fatalf("residual of another size: %v", err)
	}
	restored := NewResidual(r.Values())
	if len(restored.Values()) != n || restored.Values()[5] != r.Values()[5] {
		t.Fatal("NewResidual does not restore")
	}
}
