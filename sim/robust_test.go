package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The closed-form carbon integral equals hour-by-hour summation.
func TestCarbonIntegralMatchesBruteForce(t *testing.T) {
	env := &Env{CarbonZones: []CarbonZone{{Name: "z", Curve: []float64{10, 20, 30, 45, 7}}}}
	brute := func(a, b int64) float64 {
		var s float64
		for t := a; t < b; {
			end := min(b, (t/3600+1)*3600)
			s += float64(end-t) * env.CarbonAt(0, t)
			t = end
		}
		return s
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a := rng.Int64N(200 * 3600)
		b := a + rng.Int64N(100*3600)
		if got, want := env.CarbonIntegral(0, a, b), brute(a, b); math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Fatalf("integral [%d, %d) = %v, want %v", a, b, got, want)
		}
	}
	// Whole days of a flat 475 curve over MaxTime seconds: no loop over
	// hours, exact.
	flat := &Env{CarbonZones: []CarbonZone{{Name: "f", Curve: []float64{475}}}}
	if got := flat.CarbonIntegral(0, 0, MaxTime); got != 475*float64(MaxTime) {
		t.Errorf("flat integral = %v, want %v", got, 475*float64(MaxTime))
	}
}
