package policydoc

import (
	"math"
	"strings"
	"testing"
)

// placed is a fixed placement: service -> node -> count, node -> zone.
type placed struct {
	on   map[string]map[string]int
	zone map[string]string
}

func (p placed) Count(s string, sc Scope) map[string]int {
	out := map[string]int{}
	for n, k := range p.on[s] {
		if sc == ScopeNode {
			out[n] += k
		} else {
			out[p.zone[n]] += k
		}
	}
	return out
}

func TestEvaluate(t *testing.T) {
	d, err := Decode(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	pl := placed{
		on:   map[string]map[string]int{"orders": {"n1": 1}, "checkout": {"n2": 1}, "cache": {"n3": 1}},
		zone: map[string]string{"n1": "z1", "n2": "z2", "n3": "z2", "n4": "z1"},
	}
	n1 := &Node{Name: "n1", Zone: "z1", Arch: "amd64", CPUAllocatable: 4000, CPURequested: 1000, Carbon: 500, CarbonKnown: true}
	n2 := &Node{Name: "n2", Zone: "z2", Arch: "arm64", GPUModel: "A10", CPUAllocatable: 4000, CPURequested: 3000, Carbon: 100, CarbonKnown: true, Labels: map[string]string{"tier": "edge"}}
	n3 := &Node{Name: "n3", Zone: "z2", Arch: "amd64", GPUModel: "T4", CPUAllocatable: 4000, CPURequested: 0, Carbon: 100, CarbonKnown: true}
	cases := []struct {
		name  string
		pod   Pod
		node  *Node
		hour  int
		fits  bool
		rule  string
		inWhy string
	}{
		{"payment joins orders' zone", Pod{Service: "payment", CPU: 100}, n1, 12, true, "", ""},
		{"payment away from orders", Pod{Service: "payment", CPU: 100}, n3, 12, false, "pay-near-orders", "zone z2 is not where payment, orders run (z1)"},
		{"second checkout on n2", Pod{Service: "checkout", CPU: 100}, n2, 12, false, "rule-2", "already runs 1 checkout"},
		{"checkout elsewhere", Pod{Service: "checkout", CPU: 100}, n3, 12, true, "", ""},
		{"gpu pod on T4", Pod{GPU: true, CPU: 100}, n3, 12, false, "rule-3", "GPU model T4"},
		{"gpu pod on A10 but cpu cap", Pod{GPU: true, CPU: 300}, n2, 12, false, "rule-5", "would be 82%"},
		{"gpu pod on A10", Pod{GPU: true, CPU: 200}, n2, 12, true, "", ""},
		// 3000+200 = 80% exactly: at the cap is allowed
		{"cache needs label", Pod{Service: "cache"}, n3, 12, false, "rule-7", "lacks label tier=edge"},
		{"cache on arm64 edge", Pod{Service: "cache"}, n2, 12, true, "", ""},
		{"batch outside hours", Pod{Service: "batch"}, n3, 12, false, "rule-10", "outside 01:00-05:00"},
		{"batch inside hours", Pod{Service: "batch"}, n3, 3, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := d.Evaluate(c.pod, c.node, pl, c.hour)
			if v.Fits != c.fits || v.Rule != c.rule || !strings.Contains(v.Reason, c.inWhy) {
				t.Fatalf("verdict %+v, want fits=%v rule=%q reason containing %q", v, c.fits, c.rule, c.inWhy)
			}
		})
	}
	// carbon preference (weight 60, max 300, 22-6): at 23:00 a plain pod on
	// n1 (500 g) scores 100*300/500 = 60, on n3 (100 g) 100.
	v1 := d.Evaluate(Pod{Service: "web"}, n1, pl, 23)
	v3 := d.Evaluate(Pod{Service: "web"}, n3, pl, 23)
	if !v1.Preferred || v1.Score != 60 || v3.Score != 100 {
		t.Errorf("carbon scores %v/%v, want 60/100", v1.Score, v3.Score)
	}
	if v := d.Evaluate(Pod{Service: "web"}, n1, pl, 12); v.Preferred {
		t.Errorf("carbon preference applies outside its hours: %+v", v)
	}
	// Combine with share 40%: 0.6*50 + 0.4*60 = 54; bounds hold.
	if got := d.Combine(50, v1); got != 54 {
		t.Errorf("combine = %v, want 54", got)
	}
	if got := d.Combine(100, Verdict{Preferred: true, Score: 100}); got != 100 {
		t.Errorf("combine top = %v", got)
	}
	if got := d.Combine(37, Verdict{}); got != 37 {
		t.Errorf("combine without preference = %v, want base", got)
	}
	// db/cache separate (weight 30, node): db on n3 (runs cache) gets 0.
	if v := d.Evaluate(Pod{Service: "db"}, n3, pl, 12); v.Score != 0 {
		t.Errorf("separate preference on cache's node scored %v, want 0", v.Score)
	}
}

// TestCarbonEmissions checks the carbon preference's estimate by hand: a
// pod of 1 core and 0.2 GPU weighs 1*8 + 0.2*250 = 58 W on the reference
// node. On an arm board (2 W/core, 25 W/GPU: 2 + 5 = 7 W, share 7/58) at
// 300 g, Emissions = 300*7/58 = 36.2; on an amd64 T4 box (6 W/core, 70
// W/GPU: 6 + 14 = 20 W) at 100 g, 100*20/58 = 34.5.
func TestCarbonEmissions(t *testing.T) {
	d := &Document{APIVersion: APIVersion, Kind: DocKind, Rules: []Rule{{Name: "green", Kind: Carbon, Effect: Preferred, Weight: 10}}}
	pod := Pod{CPU: 1000, GPU: true, GPUMilli: 200}
	board := &Node{Name: "board", WattsPerCore: 2, WattsPerGPU: 25, Carbon: 300, CarbonKnown: true}
	box := &Node{Name: "box", WattsPerCore: 6, WattsPerGPU: 70, Carbon: 100, CarbonKnown: true}
	bare := &Node{Name: "bare", Carbon: 400, CarbonKnown: true} // power unknown: intensity alone
	dark := &Node{Name: "dark"}                                 // intensity unknown
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for _, c := range []struct {
		node *Node
		want float64
		ok   bool
	}{{board, 300 * 7.0 / 58, true}, {box, 100 * 20.0 / 58, true}, {bare, 400, true}, {dark, 0, false}} {
		if e, ok := Emissions(pod, c.node); ok != c.ok || !near(e, c.want) {
			t.Errorf("Emissions on %s = %v, %v; want %v, %v", c.node.Name, e, ok, c.want, c.ok)
		}
	}
	if !d.WantsEmissions(pod, 0) {
		t.Fatal("a preferred carbon rule without a threshold wants emissions")
	}
	// absolute scale (no LeastEmissions): 1 - 36.2/1000 -> 96.4 points
	if v := d.Evaluate(pod, board, nil, 0); !near(v.Score, 100*(1-300*7.0/58/1000)) {
		t.Errorf("absolute score on board = %v", v.Score)
	}
	// relative scale over {board, box, bare}: the box is least (34.5),
	// the board scores 34.5/36.2 = 95.2, bare 34.5/400 = 8.6
	pod.SetLeastEmissions(func(yield func(*Node) bool) {
		for _, n := range []*Node{board, box, bare, dark} {
			if !yield(n) {
				return
			}
		}
	})
	if !near(pod.LeastEmissions, 100*20.0/58) {
		t.Fatalf("LeastEmissions = %v, want %v", pod.LeastEmissions, 100*20.0/58)
	}
	for _, c := range []struct {
		node *Node
		want float64
	}{{box, 100}, {board, 100 * (100 * 20.0 / 58) / (300 * 7.0 / 58)}, {bare, 100 * (100 * 20.0 / 58) / 400}, {dark, 50}} {
		if v := d.Evaluate(pod, c.node, nil, 0); !near(v.Score, c.want) {
			t.Errorf("relative score on %s = %v, want %v", c.node.Name, v.Score, c.want)
		}
	}
	// a CPU-only pod on a node without power figures: intensity alone
	cpu := Pod{CPU: 500}
	if e, _ := Emissions(cpu, &Node{WattsPerCore: 8, Carbon: 250, CarbonKnown: true}); !near(e, 250) {
		t.Errorf("a reference-power node's emissions = %v, want the intensity 250", e)
	}
}
