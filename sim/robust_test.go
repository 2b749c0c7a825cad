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
		if got, want := env.carbonIntegral(0, a, b), brute(a, b); math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Fatalf("integral [%d, %d) = %v, want %v", a, b, got, want)
		}
	}
	// Whole days of a flat 475 curve over MaxTime seconds: no loop over
	// hours, exact.
	flat := &Env{CarbonZones: []CarbonZone{{Name: "f", Curve: []float64{475}}}}
	if got := flat.carbonIntegral(0, 0, MaxTime); got != 475*float64(MaxTime) {
		t.Errorf("flat integral = %v, want %v", got, 475*float64(MaxTime))
	}
}

func TestCurveMarks(t *testing.T) {
	tests := []struct {
		target, step float64
		want         []float64
	}{
		{1, 0.3, []float64{0, 0.3, 0.6, 0.9, 1}},
		{1.3, 0.5, []float64{0, 0.5, 1, 1.3}},
		{0.5, 0.2, []float64{0, 0.2, 0.4, 0.5}},
		{1.05, 0.25, []float64{0, 0.25, 0.5, 0.75, 1, 1.05}},
	}
	for _, tt := range tests {
		got := curveMarks(tt.target, tt.step)
		if len(got) != len(tt.want) {
			t.Fatalf("curveMarks(%v, %v) = %v, want %v", tt.target, tt.step, got, tt.want)
		}
		for i := range got {
			if math.Abs(got[i]-tt.want[i]) > 1e-9 {
				t.Fatalf("curveMarks(%v, %v) = %v, want %v", tt.target, tt.step, got, tt.want)
			}
		}
	}
	// 0, 0.01, ..., 1.29 and 1.3: 131 points, one of them exactly 1.
	marks := curveMarks(1.3, 0.01)
	if len(marks) != 131 || marks[100] != 1 {
		t.Errorf("default marks: %d points, [100] = %v", len(marks), marks[100])
	}
}
