package disrupt

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 4)) }

// TestNodeFailures: over 1,000 days a node failing twice a day with a
// one-hour repair fails about 1000·2/(1 + 2/24) ≈ 1,846 times (the clock
// stops while it is down); down and up alternate and never overlap.
func TestNodeFailures(t *testing.T) {
	const days = 1000
	c := Config{NodeFailures: true, MeanRepairSeconds: 3600}
	ev, err := Schedule(rng(1), 0, days*86400, c, []float64{2, 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var downs int
	isDown := false
	var downTime, last int64
	for _, e := range ev {
		if e.Index != 0 {
			t.Fatalf("node 1 (rate 0) has event %+v", e)
		}
		switch e.Kind {
		case NodeDown:
			if isDown {
				t.Fatalf("down twice at %d", e.T)
			}
			isDown, last = true, e.T
			downs++
		case NodeUp:
			if !isDown {
				t.Fatalf("up while up at %d", e.T)
			}
			isDown = false
			downTime += e.T - last
		default:
			t.Fatalf("event %+v", e)
		}
	}
	want := days * 2 / (1 + 2.0/24)
	if math.Abs(float64(downs)-want) > 5*math.Sqrt(want) {
		t.Errorf("%d failures, want about %.0f", downs, want)
	}
	if mean := float64(downTime) / float64(downs); math.Abs(mean-3600) > 5*3600/math.Sqrt(float64(downs)) {
		t.Errorf("mean repair %.0f s, want about 3600", mean)
	}
	again, _ := Schedule(rng(1), 0, days*86400, c, []float64{2, 0}, nil)
	if !slices.Equal(ev, again) {
		t.Error("same seed, different schedule")
	}
	other, _ := Schedule(rng(2), 0, days*86400, c, []float64{2, 0}, nil)
	if slices.Equal(ev, other) {
		t.Error("another seed, same schedule")
	}
	off, _ := Schedule(rng(1), 0, days*86400, Config{}, []float64{2, 2}, nil)
	if len(off) != 0 {
		t.Errorf("failures disabled: %d events", len(off))
	}
}

// TestFlaps: flaps start and end FlapSeconds apart (merged when they
// overlap), every event lies in [t0, t1), and the list is sorted.
func TestFlaps(t *testing.T) {
	u := []Uplink{{}, {FlapsPerDay: 48, FlapSeconds: 1200, FlapRTTMs: 900}}
	ev, err := Schedule(rng(3), 1000, 1000+30*86400, Config{}, nil, u)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(ev, func(a, b Event) int { return int(a.T - b.T) }) {
		t.Fatal("not sorted")
	}
	var start int64 = -1
	var flaps int
	for _, e := range ev {
		if e.T < 1000 || e.T >= 1000+30*86400 || e.Index != 1 {
			t.Fatalf("event %+v", e)
		}
		switch e.Kind {
		case FlapStart:
			if start >= 0 {
				t.Fatalf("overlapping flaps at %d", e.T)
			}
			start = e.T
			flaps++
		case FlapEnd:
			if d := e.T - start; d < 1200 {
				t.Fatalf("flap of %d s", d)
			}
			start = -1
		}
	}
	// 48 a day x 30 days, minus the merged ones: a flap merges with the
	// next one when that starts within 1200 s (probability 1 − e^−(48/86400·1200) ≈ 0.487)
	want := 48 * 30 * math.Exp(-48.0/86400*1200)
	if math.Abs(float64(flaps)-want) > 6*math.Sqrt(want) {
		t.Errorf("%d flaps, want about %.0f", flaps, want)
	}
}

func TestValidate(t *testing.T) {
	bad := []Uplink{{LossRate: -0.1}, {LossRate: 2}, {FlapLoss: math.NaN()}, {FlapsPerDay: 1}, {FlapsPerDay: 1, FlapSeconds: 60, FlapRTTMs: -1}, {FlapsPerDay: 5000, FlapSeconds: 1}}
	for _, u := range bad {
		if err := u.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", u, err)
		}
	}
	if _, err := Schedule(rng(1), 0, 10, Config{NodeFailures: true}, []float64{1}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("no repair time: %v", err)
	}
	// a runaway rate is refused, not looped on
	if _, err := Schedule(rng(1), 0, 400*86400, Config{NodeFailures: true, MeanRepairSeconds: 1, FixedRepair: true}, []float64{1e6}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("runaway rate: %v", err)
	}
}
