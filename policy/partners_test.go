package policy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestAffinityFeature checks dep_affinity against sums worked out by
// hand on testEnv (web -> api -> db; web-0 and db-0 in zone a, db-1 in
// zone b).
func TestAffinityFeature(t *testing.T) {
	env := testEnv(t)
	st := boundTestState(t, env)
	svc := func(name string) int32 {
		for i, s := range env.Services {
			if s == name {
				return int32(i)
			}
		}
		t.Fatalf("no service %s", name)
		return -1
	}
	x := NewExtractor(env)
	f := make([]float32, NumFeatures)
	at := func(pod int32, node int) float64 {
		p := &st.Pods[pod]
		x.BeginPod(st, p)
		x.Extract(st, p, node, f)
		return float64(f[AffinityFeature])
	}
	if got := at(1, 2); got != 0 {
		t.Fatalf("without partners: %v, want 0", got)
	}
	env.Partners = make([][]sim.Partner, len(env.Services))
	env.Partners[svc("api")] = []sim.Partner{{Service: svc("web"), P: 0.2}, {Service: svc("db"), P: 0.8}}
	env.Partners[svc("web")] = []sim.Partner{{Service: svc("api"), P: 0.5}, {Service: svc("db"), P: 0.1}}
	env.PartnersEncoder = AffinityEncoder
	x = NewExtractor(env)
	for _, c := range []struct {
		name      string
		pod       int32
		node      int
		want      float64
		reasoning string
	}{
		{"api on arm (zone b)", 1, 2, 0.4, "(0.2 * 0 (web-0 in a) + 0.8 * 1/2 (db-1 of two)) / (0.2 + 0.8)"},
		{"api on g8 (zone a)", 1, 1, 0.6, "(0.2 * 1 + 0.8 * 1/2) / 1"},
		{"web on arm (zone b)", 2, 2, 0.5, "api has no pod placed: 0.1 * 1/2 / 0.1"},
		{"web on g2 (zone a)", 2, 0, 0.5, "the same, in zone a"},
		{"db without partners", 3, 1, 0, "db has no partner list"},
		{"a pod without a service", 0, 0, 0, "no service"},
	} {
		if got := at(c.pod, c.node); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: %v, want %v = %s", c.name, got, c.want, c.reasoning)
		}
	}
	// a model that carries GraphSAGE weights of its own reads partners of
	// their ID only: the shipped encoder's are 0 to it, its own are read
	x.UsePartnersOf("sage-own")
	if got := at(1, 1); got != 0 {
		t.Fatalf("partners of the shipped encoder, read by a model of its own weights: %v, want 0", got)
	}
	env.PartnersEncoder = "sage-own"
	if got := at(1, 1); math.Abs(got-0.6) > 1e-6 {
		t.Fatalf("partners of the model's own weights: %v, want 0.6 as above", got)
	}
	x.UsePartnersOf("")
	if got := at(1, 1); got != 0 {
		t.Fatalf("partners of another encoder than the shipped one, for a model without its own: %v, want 0", got)
	}
}

// readsSome is a scorer that reads the inputs in reads.
type readsSome map[int]bool

func (readsSome) Scores([]float32, int, []float32) error { return nil }
func (r readsSome) ReadsInput(i int) bool                { return r[i] }

func TestCheckPartners(t *testing.T) {
	env := testEnv(t)
	all := readsSome{AffinityFeature: true}
	if err := CheckPartners(env, all, ""); !errors.Is(err, ErrSchema) {
		t.Fatalf("no partners: %v, want ErrSchema", err)
	}
	if err := CheckPartners(env, readsSome{}, ""); err != nil {
		t.Fatalf("a scorer without dep_affinity: %v", err)
	}
	env.Partners, env.PartnersEncoder = [][]sim.Partner{{}}, "sage-other"
	if err := CheckPartners(env, all, ""); !errors.Is(err, ErrSchema) {
		t.Fatalf("another encoder: %v, want ErrSchema", err)
	}
	env.PartnersEncoder = AffinityEncoder
	if err := CheckPartners(env, all, ""); err != nil {
		t.Fatal(err)
	}
	// a model that carries its own weights reads their partners only
	if err := CheckPartners(env, all, "sage-own"); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "sage-own") {
		t.Fatalf("the shipped encoder's partners for a model of its own weights: %v, want ErrSchema naming them", err)
	}
	env.PartnersEncoder = "sage-own"
	if err := CheckPartners(env, all, "sage-own"); err != nil {
		t.Fatal(err)
	}
}

// TestPartnersOf resolves published partners to an env's services:
// unknown services and partners are left out.
func TestPartnersOf(t *testing.T) {
	e := &kubefmt.Embeddings{Services: []kubefmt.ServiceEmbedding{
		{Name: "api", Partners: []kubefmt.Partner{{Service: "db", P: 255}, {Service: "gone", P: 9}, {Service: "web", P: 51}}},
		{Name: "gone", Partners: []kubefmt.Partner{{Service: "api", P: 1}}},
		{Name: "web"},
	}}
	got := PartnersOf(e, []string{"web", "api", "db"})
	if len(got) != 3 || len(got[0]) != 0 || len(got[2]) != 0 {
		t.Fatalf("partners %+v", got)
	}
	// 255/255 and 51/255
	if a := got[1]; len(a) != 2 || a[0] != (sim.Partner{Service: 2, P: 1}) || a[1] != (sim.Partner{Service: 0, P: 0.2}) {
		t.Fatalf("api's partners %+v", a)
	}
	if PartnersOf(nil, []string{"a"}) != nil || PartnersOf(&kubefmt.Embeddings{Services: []kubefmt.ServiceEmbedding{{Name: "a"}}}, []string{"a"}) != nil {
		t.Fatal("no partners should be nil")
	}
}
