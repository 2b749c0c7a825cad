package engine

import (
	"math"
	"testing"
)

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

// TestCurveMarksBounded: curveMarks stops after MaxCurveMarks (100,000)
// steps whatever step it is given (Validate refuses such steps; a step of
// 1e-300 used to loop for 1e300 steps, all rounding to the mark 0), and
// never holds more than the marks it may return.
func TestCurveMarksBounded(t *testing.T) {
	const maxMarks = 100_000 // MaxCurveMarks
	for _, tc := range []struct {
		target, step float64
		want         int // marks
	}{
		{1.3, 1e-300, 3},                       // 0, 1, 1.3: every step rounds to the mark 0
		{1, 1e-5, maxMarks + 1},                // the cap: 0, 0.00001, ..., 0.99999, then 1
		{1, 1e-8, maxMarks + 2},                // stops after the cap's steps (0 .. 0.001), then 1
		{0.05, math.SmallestNonzeroFloat64, 2}, // 0, 0.05
	} {
		marks := curveMarks(tc.target, tc.step)
		if len(marks) != tc.want {
			t.Errorf("curveMarks(%v, %v): %d marks, want %d", tc.target, tc.step, len(marks), tc.want)
		}
		if cap(marks) > maxMarks+3 {
			t.Errorf("curveMarks(%v, %v): capacity %d, want at most %d", tc.target, tc.step, cap(marks), maxMarks+3)
		}
	}
}
