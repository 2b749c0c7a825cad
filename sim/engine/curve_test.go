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
