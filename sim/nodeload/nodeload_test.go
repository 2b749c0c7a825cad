package nodeload

import (
	"errors"
	"math"
	"testing"
)

// TestRespondLegacy: with nothing but steady CPU use, the latency terms
// reduce bit for bit to the simulator's earlier proxy base / (1 − min(ρ,
// MaxUtil)), including a use a hair below zero left by float sums.
func TestRespondLegacy(t *testing.T) {
	m := DefaultModel()
	for _, used := range []float64{0, -1e-13, 1, 1234.5678, 3999.9, 4000, 5000, 1e9} {
		tel := m.Respond(Input{CPUMilli: 4000, MemMiB: 8192, MemUsedMiB: 1000, Demand: used})
		want := 10 / (1 - min(used/4000, m.MaxUtil))
		if got := 10 / (1 - tel.RhoEff) * tel.MemFactor; got != want || tel.NICDelayMs != 0 {
			t.Errorf("use %v: latency %v, want %v (nic %v)", used, got, want, tel.NICDelayMs)
		}
		if tel.CPU < 0 || tel.CPU > 1 || math.IsNaN(tel.RunQueueP99Us) || tel.RunQueueP99Us < m.RunQueueBaseUs {
			t.Errorf("use %v: %+v", used, tel)
		}
	}
}

// TestRespondFormulas checks each quantity against the documented formula,
// computed here by hand for round inputs.
func TestRespondFormulas(t *testing.T) {
	m := DefaultModel()
	// 4 cores at ρ = 0.5: wait/S = 0.5^(√10 − 1) / (4 × 0.5)
	w := math.Pow(0.5, math.Sqrt(10)-1) / 2
	cases := []struct {
		name string
		in   Input
		want Telemetry
	}{
		{"half busy", Input{CPUMilli: 4000, MemMiB: 1000, Demand: 2000, MemUsedMiB: 500},
			Telemetry{CPU: 0.5, Mem: 0.5, Demand: 0.5, RhoEff: 0.5, MemFactor: 1, RunQueueP99Us: 20 + math.Log(100)*1000*w, Load1: 4 * 0.5 * (1 + w)}},
		{"interference doubles the run-queue demand, not the CPU", Input{CPUMilli: 4000, MemMiB: 1000, Demand: 1000, Contention: 1000},
			Telemetry{CPU: 0.25, Demand: 0.25, RhoEff: 0.5, MemFactor: 1, RunQueueP99Us: 20 + math.Log(100)*1000*w, Load1: 4 * 0.5 * (1 + w)}},
		{"memory at 95%: pressure 0.5, factor 1 + 4 × 0.25", Input{CPUMilli: 1000, MemMiB: 1000, MemUsedMiB: 950},
			Telemetry{Mem: 0.95, MemPressure: 0.5, MemFactor: 2, RunQueueP99Us: 20}},
		{"memory over-committed: capped", Input{CPUMilli: 1000, MemMiB: 1000, MemUsedMiB: 3000},
			Telemetry{Mem: 1, MemPressure: 1, MemFactor: 5, RunQueueP99Us: 20}},
		{"100 Mbit/s at 1% loss", Input{CPUMilli: 1000, MemMiB: 1, NetMbps: 100, Loss: 0.01},
			Telemetry{NetMbps: 100, RetransPerS: 100e6 / 8 / 1448 * 0.01, NICDelayMs: 0.2 * 0.1 / 0.9, MemFactor: 1, RunQueueP99Us: 20}},
		{"a saturated 100 Mbit/s NIC drops 2%", Input{CPUMilli: 1000, MemMiB: 1, NetMbps: 200, NICMbps: 100},
			Telemetry{NetMbps: 100, RetransPerS: 100e6 / 8 / 1448 * 0.02, NICDelayMs: 0.2 * 0.95 / 0.05, MemFactor: 1, RunQueueP99Us: 20}},
		{"overloaded: queue beyond the cores", Input{CPUMilli: 2000, MemMiB: 1, Demand: 4000},
			Telemetry{CPU: 1, Demand: 2, RhoEff: 0.95, MemFactor: 1,
				RunQueueP99Us: 20 + math.Log(100)*1000*math.Pow(0.95, math.Sqrt(6)-1)/(2*0.05),
				Load1:         2*0.95*(1+math.Pow(0.95, math.Sqrt(6)-1)/(2*0.05)) + 2}},
		{"down", Input{CPUMilli: 2000, Demand: 4000, Down: true}, Telemetry{Down: true, MemFactor: 1}},
	}
	for _, c := range cases {
		got := m.Respond(c.in)
		if !close(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func close(a, b Telemetry) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*max(1, math.Abs(y)) }
	return a.Down == b.Down && eq(a.CPU, b.CPU) && eq(a.Mem, b.Mem) && eq(a.Load1, b.Load1) && eq(a.RunQueueP99Us, b.RunQueueP99Us) &&
		eq(a.RetransPerS, b.RetransPerS) && eq(a.NetMbps, b.NetMbps) && eq(a.MemPressure, b.MemPressure) && eq(a.Demand, b.Demand) &&
		eq(a.RhoEff, b.RhoEff) && eq(a.MemFactor, b.MemFactor) && eq(a.NICDelayMs, b.NICDelayMs)
}

// TestRunQueueGrowsWithLoad: more load never lowers the run-queue p99, and
// more cores at the same utilisation lower it (M/M/c pooling).
func TestRunQueueGrowsWithLoad(t *testing.T) {
	m := DefaultModel()
	prev := 0.0
	for rho := 0.0; rho <= 1.2; rho += 0.05 {
		r := m.Respond(Input{CPUMilli: 4000, Demand: rho * 4000}).RunQueueP99Us
		if r < prev {
			t.Fatalf("ρ %.2f: p99 %v below %v", rho, r, prev)
		}
		prev = r
	}
	four := m.Respond(Input{CPUMilli: 4000, Demand: 3000}).RunQueueP99Us
	sixteen := m.Respond(Input{CPUMilli: 16000, Demand: 12000}).RunQueueP99Us
	if !(sixteen < four) {
		t.Errorf("75%% busy: 16 cores p99 %v not below 4 cores %v", sixteen, four)
	}
}

func TestProfileFactor(t *testing.T) {
	p := Profile{Name: "web", Amplitude: 0.5, PeakHour: 14}
	if f := p.Factor(14*3600, 1, 1, 0); math.Abs(f-1.5) > 1e-12 {
		t.Errorf("peak factor %v, want 1.5", f)
	}
	if f := p.Factor(2*3600+24*3600, 1, 1, 0); math.Abs(f-0.5) > 1e-12 {
		t.Errorf("trough factor (next day) %v, want 0.5", f)
	}
	// bursts: 12 a day of 10 minutes = 1/12 of the slots, at 3x; the share
	// of bursting slots over 100 nodes x 10 days is within 5 standard
	// deviations of 1/12, draws are a function of (seed, profile, node, slot)
	b := Profile{Name: "b", BurstsPerDay: 12, BurstSeconds: 600, BurstMultiplier: 3}
	const nodes, slots = 100, 1440
	var bursts int
	for n := range nodes {
		for s := range slots {
			f := b.Factor(int64(s)*600+17, 42, 2, n)
			if f != 1 && f != 3 {
				t.Fatalf("factor %v", f)
			}
			if f == 3 {
				bursts++
			}
			if f != b.Factor(int64(s)*600+599, 42, 2, n) {
				t.Fatal("a burst changes inside its slot")
			}
		}
	}
	p0, N := 1.0/12, float64(nodes*slots)
	if got := float64(bursts) / N; math.Abs(got-p0) > 5*math.Sqrt(p0*(1-p0)/N) {
		t.Errorf("burst share %v, want %v", got, p0)
	}
	if m := b.Mean(); math.Abs(m-(1+2.0/12)) > 1e-12 {
		t.Errorf("mean %v", m)
	}
	var same int
	for s := range 1000 {
		if b.Factor(int64(s)*600, 1, 2, 0) == b.Factor(int64(s)*600, 2, 2, 0) {
			same++
		}
	}
	if same == 1000 {
		t.Error("bursts do not depend on the seed")
	}
}

func TestValidate(t *testing.T) {
	bad := []Profile{
		{Name: "a", Amplitude: 1.5},
		{Name: "a", Amplitude: math.NaN()},
		{Name: "a", PeakHour: 24},
		{Name: "a", BurstsPerDay: 1},
		{Name: "a", BurstsPerDay: 1, BurstSeconds: 60, BurstMultiplier: 0.5},
		{Name: "a", BurstsPerDay: 100, BurstSeconds: 3600, BurstMultiplier: 2},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", p, err)
		}
	}
	good := Profile{Name: "a", Amplitude: 1, PeakHour: 23.5, BurstsPerDay: 24, BurstSeconds: 3600, BurstMultiplier: 100}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
	m := DefaultModel()
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
	m.MaxUtil = 1
	if err := m.Validate(); !errors.Is(err, ErrInvalid) {
		t.Error("MaxUtil 1 accepted")
	}
}

// TestFromMeasured: a measured summary gets the same model terms a node
// with that CPU and memory share would have.
func TestFromMeasured(t *testing.T) {
	m := DefaultModel()
	got := m.FromMeasured(0.98, 0.95, 7.5, 12000, 3)
	want := Telemetry{CPU: 0.98, Mem: 0.95, Load1: 7.5, RunQueueP99Us: 12000, RetransPerS: 3, Demand: 0.98, RhoEff: 0.95, MemPressure: 0.5, MemFactor: 2}
	if !close(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if c := m.FromMeasured(math.NaN(), 2, -1, -1, -1); c.CPU != 0 || c.Mem != 1 || c.Load1 != 0 || c.MemFactor != 5 {
		t.Errorf("clamping: %+v", c)
	}
}
