package sage

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim/scenario"
)

// TestDefaultIsTheSchemasEncoder: a model without GraphSAGE weights of
// its own reads partners of Default's encoder and decoder
// (policy.AffinityEncoder); the ID of the pair covers the decoder, and
// the encoder's alone is another (what embeddings without partners are
// published under).
func TestDefaultIsTheSchemasEncoder(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if id := p.ID(); id != policy.AffinityEncoder {
		t.Fatalf("Default's encoder and decoder are %s, the schema names %s: new shipped weights need a new policy.AffinityEncoder (and models trained on them)", id, policy.AffinityEncoder)
	}
	if id := p.Encoder.ID(); id == policy.AffinityEncoder {
		t.Fatalf("the encoder alone has the pair's ID %s: the ID must cover the decoder", id)
	}
}

// embedPartners is g's embeddings by p's encoder and their partners.
func embedPartners(t *testing.T, p *Pretrained, g *Graph) (*Embeddings, map[string][]kubefmt.Partner) {
	t.Helper()
	m, err := p.Encoder.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := m.Partners(g, p.Decoder)
	if err != nil {
		t.Fatal(err)
	}
	return m, parts
}

// TestPartnersWithinTwoCalls checks partners on a chain a -> b -> c -> d
// -> e: the services within two calls, either direction, each with the
// decoder's probability recomputed here from the embeddings (the
// symmetric part of M, scale, sigmoid).
func TestPartnersWithinTwoCalls(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	g := &Graph{}
	names := []string{"a", "b", "c", "d", "e"}
	for i, n := range names {
		g.Services = append(g.Services, Service{Name: n})
		if i > 0 {
			g.Calls = append(g.Calls, Call{From: names[i-1], To: n, Rate: float64(i)})
		}
	}
	m, parts := embedPartners(t, p, g)
	prob := func(x, y string) uint8 {
		a, b, d := m.Of(x), m.Of(y), p.Decoder.D
		var s float64
		for i := range d {
			for j := range d {
				s += float64(a[i]) * float64(p.Decoder.M[i*d+j]+p.Decoder.M[j*d+i]) / 2 * float64(b[j])
			}
		}
		return kubefmt.QuantizeProbability(1 / (1 + math.Exp(-p.Decoder.Scale*s)))
	}
	for svc, want := range map[string][]string{
		"a": {"b", "c"}, "b": {"a", "c", "d"}, "c": {"a", "b", "d", "e"}, "d": {"b", "c", "e"}, "e": {"c", "d"},
	} {
		got := parts[svc]
		var gotNames []string
		for i, q := range got {
			gotNames = append(gotNames, q.Service)
			if w := prob(svc, q.Service); q.P != w && q.P+1 != w && q.P != w+1 { // float32 sums: one step at most
				t.Errorf("%s-%s: p %d, recomputed %d", svc, q.Service, q.P, w)
			}
			if i > 0 && got[i-1].P < q.P {
				t.Errorf("%s: partners not by descending p: %v", svc, got)
			}
		}
		slices.Sort(gotNames)
		if !slices.Equal(gotNames, want) {
			t.Errorf("%s: partners %v, want %v", svc, gotNames, want)
		}
	}
}

// TestPartnersBounded: a leaf of a 40-leaf star has 40 services within
// two calls (the hub and 39 leaves); it keeps the kubefmt.MaxPartners
// most probable.
func TestPartnersBounded(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	g := &Graph{Services: []Service{{Name: "hub"}}}
	for i := range 40 {
		n := fmt.Sprintf("leaf-%02d", i)
		g.Services = append(g.Services, Service{Name: n})
		g.Calls = append(g.Calls, Call{From: "hub", To: n, Rate: float64(1 + i)})
	}
	_, parts := embedPartners(t, p, g)
	if n := len(parts["leaf-00"]); n != kubefmt.MaxPartners {
		t.Fatalf("%d partners, want %d", n, kubefmt.MaxPartners)
	}
	if n := len(parts["hub"]); n != kubefmt.MaxPartners {
		t.Fatalf("hub: %d partners, want %d", n, kubefmt.MaxPartners)
	}
	pub, err := Publish(p.Encoder, p.Decoder, p.Encoder.ID(), g, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Encode(); err != nil || pub.Version != kubefmt.EmbeddingsVersion {
		t.Fatalf("published version %d: %v", pub.Version, err)
	}
}

// TestAnnotate: a scenario's env gets partners for its services with
// calls, of the schema's encoder, that the learned policy accepts; an
// env without calls is left alone.
func TestAnnotate(t *testing.T) {
	l, err := scenario.Load("builtin:retail-stores")
	if err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	if env.PartnersEncoder != policy.AffinityEncoder || len(env.Partners) != len(env.Services) {
		t.Fatalf("encoder %q, %d partner lists for %d services", env.PartnersEncoder, len(env.Partners), len(env.Services))
	}
	with := 0
	for s, ps := range env.Partners {
		if len(ps) > 0 {
			with++
		}
		for _, q := range ps {
			if int(q.Service) == s || q.P < 0 || q.P > 1 {
				t.Fatalf("service %d: partner %+v", s, q)
			}
		}
	}
	if with < len(env.Edges)/2 {
		t.Fatalf("%d services with partners for %d calls", with, len(env.Edges))
	}
	if err := policy.CheckPartners(env, nil, ""); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPublish1000 is the site leader's cost of what it writes for a
// 1,000-service graph (BenchmarkEmbed1000's): the embeddings, every
// service's partners and the encoding; it reports the encoded bytes and
// the partners listed.
func BenchmarkPublish1000(b *testing.B) {
	p, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	g := bigGraph(1000)
	var raw []byte
	var m *kubefmt.Embeddings
	for b.Loop() {
		if m, err = Publish(p.Encoder, p.Decoder, p.Encoder.ID(), g, time.Time{}); err != nil {
			b.Fatal(err)
		}
		if raw, err = m.Encode(); err != nil {
			b.Fatal(err)
		}
	}
	var partners int
	for _, s := range m.Services {
		partners += len(s.Partners)
	}
	b.ReportMetric(float64(len(raw)), "bytes")
	b.ReportMetric(float64(partners), "partners")
	b.ReportMetric(float64(len(m.Services)), "services")
}
