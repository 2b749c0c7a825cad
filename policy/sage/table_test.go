package sage

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/edgesched/edgesched/kubefmt"
)

func TestEncoderID(t *testing.T) {
	enc, err := Untrained(DefaultPretrainConfig())
	if err != nil {
		t.Fatal(err)
	}
	id := enc.ID()
	if len(id) != len("sage-")+16 || enc.Clone().ID() != id {
		t.Fatalf("ID %q, a clone's %q", id, enc.Clone().ID())
	}
	c := enc.Clone()
	c.Seed++
	w := enc.Clone()
	w.Net.Params()[2].Values()[5] += 1e-6
	f := enc.Clone()
	f.Fanouts[0]++
	for name, o := range map[string]*Encoder{"seed": c, "a weight": w, "a fan-out": f} {
		if o.ID() == id {
			t.Errorf("another %s, the same ID", name)
		}
	}
}

// TestPublishedEmbeddings: the leader's path from a published graph to
// the ConfigMap's embeddings and back keeps every value within half a
// quantization step, and a graph past kubefmt.MaxEmbeddedServices keeps
// its busiest services.
func TestPublishedEmbeddings(t *testing.T) {
	enc, err := Untrained(DefaultPretrainConfig())
	if err != nil {
		t.Fatal(err)
	}
	edges := []kubefmt.DependencyEdge{{From: "frontend", To: "cart", CallsPerSecond: 30}, {From: "frontend", To: "checkout", CallsPerSecond: 5}, {From: "checkout", To: "cart", CallsPerSecond: 5}}
	g := FromDependencies(edges)
	if len(g.Services) != 3 || len(g.Calls) != 3 {
		t.Fatalf("graph %+v", g)
	}
	m, err := enc.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	raw, err := m.Quantized(enc.ID(), g, at, nil).Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := kubefmt.DecodeEmbeddings(raw)
	if err != nil {
		t.Fatal(err)
	}
	if back.Encoder != enc.ID() || !back.Updated.Equal(at) || back.Dim != m.Dim {
		t.Fatalf("header %+v", back)
	}
	tab := back.Table()
	for _, s := range back.Services {
		want := m.Of(s.Name)
		for j, v := range tab[s.Name] {
			if math.Abs(float64(v-want[j])) > float64(s.Scale)/2*1.0001 {
				t.Fatalf("%s value %d: %v published, %v computed (scale %v)", s.Name, j, v, want[j], s.Scale)
			}
		}
	}

	big := bigGraph(kubefmt.MaxEmbeddedServices + 50)
	bm, err := enc.Embed(big)
	if err != nil {
		t.Fatal(err)
	}
	q := bm.Quantized(enc.ID(), big, at, nil)
	if len(q.Services) != kubefmt.MaxEmbeddedServices {
		t.Fatalf("%d services published", len(q.Services))
	}
	load := map[string]float64{}
	for _, c := range big.Calls {
		load[c.From] += c.Rate
		load[c.To] += c.Rate
	}
	kept := map[string]bool{}
	least := math.Inf(1)
	for _, s := range q.Services {
		kept[s.Name] = true
		least = min(least, load[s.Name])
	}
	for _, s := range big.Services {
		if !kept[s.Name] && load[s.Name] > least {
			t.Fatalf("%s (%.1f calls/s) left out, %.1f kept", s.Name, load[s.Name], least)
		}
	}
	if _, err := q.Encode(); err != nil {
		t.Fatalf("the largest table does not fit: %v", err)
	}
	// names of 200 bytes: the byte bound holds fewer services, still the
	// busiest, and the table encodes
	long := &Graph{}
	for i := range 1500 {
		long.Services = append(long.Services, Service{Name: fmt.Sprintf("%0200d", i)})
		if i > 0 {
			long.Calls = append(long.Calls, Call{long.Services[i-1].Name, long.Services[i].Name, float64(i)})
		}
	}
	lm, err := enc.Embed(long)
	if err != nil {
		t.Fatal(err)
	}
	lq := lm.Quantized(enc.ID(), long, at, nil)
	if _, err := lq.Encode(); err != nil || len(lq.Services) >= 1500 || len(lq.Services) < 500 {
		t.Fatalf("%d of 1500 long-named services kept: %v", len(lq.Services), err)
	}
	// s1498 is called at 1497 and calls at 1498 per second: the busiest
	if lq.Services[0].Name != long.Services[1498].Name {
		t.Fatalf("busiest kept first: %s", lq.Services[0].Name[190:])
	}
}
