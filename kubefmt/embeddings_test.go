package kubefmt

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// exampleEmbeddings is what a leader writes for a three-service graph
// (the unit vectors below, quantized).
const exampleEmbeddings = `{"version":1,"encoder":"sage-3f9a0c1e2b7d4a55","updated":"2026-12-03T12:00:00Z","dim":4,"services":[` +
	`{"name":"cart","scale":0.0062992126,"values":"f0D/AA=="},` +
	`{"name":"checkout","scale":0.007874016,"values":"AH8AAA=="},` +
	`{"name":"frontend","scale":0.003937008,"values":"f39/fw=="}]}`

// examplePartners is the same graph's embeddings in version 2, with each
// service's partners (frontend calls cart and checkout, checkout calls
// cart: each is within two calls of the others): cart's "AAHwAAIR" is
// the bytes 0 1 240 0 2 17, checkout (index 1) with p 240 and frontend
// (index 2) with p 17.
const examplePartners = `{"version":2,"encoder":"sage-3f9a0c1e2b7d4a55","updated":"2026-12-03T12:00:00Z","dim":4,"services":[` +
	`{"name":"cart","scale":0.0062992126,"values":"f0D/AA==","partners":"AAHwAAIR"},` +
	`{"name":"checkout","scale":0.007874016,"values":"AH8AAA==","partners":"AADwAALI"},` +
	`{"name":"frontend","scale":0.003937008,"values":"f39/fw==","partners":"AAHIAAAR"}]}`

func TestPartners(t *testing.T) {
	m, err := DecodeEmbeddings([]byte(examplePartners))
	if err != nil {
		t.Fatal(err)
	}
	p := m.Services[1].Partners
	// 240/255 and 200/255
	if len(p) != 2 || p[0].Service != "cart" || p[1].Service != "frontend" || p[0].PartnerProbability() != float32(240)/255 || p[1].PartnerProbability() != float32(200)/255 {
		t.Fatalf("checkout's partners %+v", p)
	}
	// Encode writes partners by the index of the name-sorted services,
	// whatever the order in memory
	m.Services[0], m.Services[2] = m.Services[2], m.Services[0]
	if b, err := m.Encode(); err != nil || string(b) != examplePartners {
		t.Fatalf("encoded from another order: %v\n%s", err, b)
	}
	m.Services[0], m.Services[2] = m.Services[2], m.Services[0]
	b, err := m.Encode()
	if err != nil || string(b) != examplePartners {
		t.Fatalf("encoded again: %v\n%s\nwant\n%s", err, b, examplePartners)
	}
	for _, c := range []struct {
		p    float64
		want uint8
	}{{0, 0}, {-1, 0}, {math.NaN(), 0}, {1, 255}, {2, 255}, {0.5, 128}, {1.0 / 510, 1}, {0.999 / 510, 0}} {
		if got := QuantizeProbability(c.p); got != c.want {
			t.Errorf("QuantizeProbability(%v) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestQuantizeEmbedding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range [][]float32{
		{0.8, 0.6, 0, 0},
		{0, 0, 0, 0},
		{-1, 1, 0.5, -0.25},
		{1e-30, -1e-30, 0, 0},
	} {
		s := QuantizeEmbedding("svc", v)
		m := Embeddings{Version: EmbeddingsVersion, Encoder: "e", Dim: len(v), Services: []ServiceEmbedding{s}}
		if err := m.Validate(); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		back := s.Vector()
		for i := range v {
			if d := math.Abs(float64(back[i] - v[i])); d > float64(s.Scale)/2*1.0001 {
				t.Errorf("%v: value %d back as %v, off by %v > half a scale %v", v, i, back[i], d, s.Scale/2)
			}
		}
	}
	// random unit vectors of width 16: off by at most 1/254 each
	for range 100 {
		v := make([]float32, 16)
		var sq float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			sq += float64(v[i]) * float64(v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(sq))
		}
		s := QuantizeEmbedding("x", v)
		for i, b := range s.Vector() {
			if math.Abs(float64(b-v[i])) > 1.0/254+1e-6 {
				t.Fatalf("value %v back as %v", v[i], b)
			}
		}
	}
}

func TestEmbeddingsRoundTrip(t *testing.T) {
	m, err := DecodeEmbeddings([]byte(exampleEmbeddings))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != exampleEmbeddings {
		t.Fatalf("re-encoded:\n%s\nwant\n%s", enc, exampleEmbeddings)
	}
	tab := m.Table()
	// cart: values 127, 64, -1, 0 times 0.0062992126 (0.8/127)
	if got := tab["cart"]; math.Abs(float64(got[0])-0.8) > 1e-6 || math.Abs(float64(got[1])-64*0.0062992126) > 1e-6 || got[2] >= 0 {
		t.Fatalf("cart = %v", got)
	}
	if len(tab) != 3 || tab["nope"] != nil {
		t.Fatalf("table %v", tab)
	}
}

func TestEmbeddingsRefused(t *testing.T) {
	ok := func() *Embeddings {
		m, err := DecodeEmbeddings([]byte(exampleEmbeddings))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		name string
		edit func(m *Embeddings)
		want string
	}{
		{"version", func(m *Embeddings) { m.Version = 3 }, "version 3"},
		{"partners in version 1", func(m *Embeddings) { m.Services[0].Partners = []Partner{{"checkout", 1}} }, "partners in version 1"},
		{"partner itself", func(m *Embeddings) { m.Version = 2; m.Services[0].Partners = []Partner{{"cart", 1}} }, "cart is the service itself"},
		{"partner twice", func(m *Embeddings) { m.Version = 2; m.Services[0].Partners = []Partner{{"b", 1}, {"b", 2}} }, "given twice"},
		{"partner name", func(m *Embeddings) { m.Version = 2; m.Services[0].Partners = []Partner{{"", 1}} }, "partners[0]"},
		{"partner without embedding", func(m *Embeddings) { m.Version = 2; m.Services[0].Partners = []Partner{{"payment", 1}} }, "payment has no embedding"},
		{"too many partners", func(m *Embeddings) {
			m.Version = 2
			for i := range MaxPartners + 1 {
				m.Services[0].Partners = append(m.Services[0].Partners, Partner{Service: fmt.Sprint("s", i)})
			}
		}, "33 partners"},
		{"no encoder", func(m *Embeddings) { m.Encoder = "" }, "encoder"},
		{"encoder with a space", func(m *Embeddings) { m.Encoder = "a b" }, "encoder name"},
		{"dim", func(m *Embeddings) { m.Dim = MaxEmbeddingDim + 1 }, "dim 65"},
		{"wrong width", func(m *Embeddings) { m.Dim = 7 }, "characters of values"},
		{"one byte short", func(m *Embeddings) { m.Dim = 5 }, "not base64 of 5 bytes"},
		{"not base64", func(m *Embeddings) { m.Services[0].Values = "f0D/AA=!" }, "not base64"},
		{"twice", func(m *Embeddings) { m.Services[1].Name = "cart" }, "cart given twice"},
		{"bad name", func(m *Embeddings) { m.Services[0].Name = "a\nb" }, "services[0].name"},
		{"zero scale", func(m *Embeddings) { m.Services[2].Scale = 0 }, "scale 0"},
		{"NaN scale", func(m *Embeddings) { m.Services[2].Scale = float32(math.NaN()) }, "scale NaN"},
		{"too many", func(m *Embeddings) { m.Services = make([]ServiceEmbedding, MaxEmbeddedServices+1) }, "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ok()
			c.edit(m)
			_, err := m.Encode()
			if !errors.Is(err, ErrEmbeddings) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrEmbeddings naming %q", err, c.want)
			}
		})
	}
	for name, b := range map[string]string{
		"unknown key":    strings.Replace(exampleEmbeddings, `"dim"`, `"dims"`, 1),
		"key in case":    strings.Replace(exampleEmbeddings, `"scale"`, `"Scale"`, 1),
		"repeated key":   strings.Replace(exampleEmbeddings, `"dim":4`, `"dim":4,"dim":4`, 1),
		"trailing data":  exampleEmbeddings + "{}",
		"index past":     strings.Replace(examplePartners, `"AAHwAAIR"`, `"AAPwAAIR"`, 1),
		"partial entry":  strings.Replace(examplePartners, `"AAHwAAIR"`, `"AAHwAA=="`, 1),
		"not base64":     strings.Replace(examplePartners, `"AAHwAAIR"`, `"AAHw!AIR"`, 1),
		"itself":         strings.Replace(examplePartners, `"AAHwAAIR"`, `"AADwAAIR"`, 1),
		"twice":          strings.Replace(examplePartners, `"AAHwAAIR"`, `"AAHwAAER"`, 1),
		"unsorted":       strings.Replace(strings.Replace(examplePartners, `"name":"cart"`, `"name":"zzz"`, 1), `"AAHIAAAR"`, `"AAHI"`, 1),
		"partners in v1": strings.Replace(examplePartners, `"version":2`, `"version":1`, 1),
		"too large":      strings.Repeat(" ", MaxEmbeddingsBytes+1),
	} {
		if _, err := DecodeEmbeddings([]byte(b)); !errors.Is(err, ErrEmbeddings) {
			t.Errorf("%s: %v, want ErrEmbeddings", name, err)
		}
	}
}

// FuzzDecodeEmbeddings: no input panics, and whatever decodes encodes
// and decodes again to the same embeddings.
func FuzzDecodeEmbeddings(f *testing.F) {
	f.Add([]byte(exampleEmbeddings))
	f.Add([]byte(examplePartners))
	f.Add([]byte(`{"version":1,"encoder":"e","dim":1,"services":[]}`))
	f.Add([]byte(`{"version":1,"encoder":"e","dim":1,"services":[{"name":"a","scale":1e-45,"values":"gA=="}]}`))
	f.Add([]byte(`{"version":1,"encoder":"e","dim":2,"services":[{"name":"a","scale":1,"values":"gA=="}],"services":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeEmbeddings(b)
		if err != nil {
			if !errors.Is(err, ErrEmbeddings) {
				t.Fatalf("error without ErrEmbeddings: %v", err)
			}
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded embeddings do not encode: %v", err)
		}
		back, err := DecodeEmbeddings(enc)
		if err != nil || len(back.Services) != len(m.Services) {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
		for name, v := range m.Table() {
			w := back.Table()[name]
			for i := range v {
				if v[i] != w[i] {
					t.Fatalf("%s value %d: %v then %v", name, i, v[i], w[i])
				}
			}
		}
		partners := map[string][]Partner{}
		for _, s := range back.Services {
			partners[s.Name] = s.Partners
		}
		for _, s := range m.Services {
			if !slices.Equal(s.Partners, partners[s.Name]) {
				t.Fatalf("%s's partners %v then %v", s.Name, s.Partners, partners[s.Name])
			}
		}
	})
}
