package curve

import (
	"errors"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/edgesched/edgesched/policy/ppo"
)

// history is a run's history as ppo.Train returns it: two cloning epochs
// (the second evaluated) and three PPO iterations (the 1st and 3rd
// evaluated).
var history = []ppo.Row{
	{Phase: "bc", Iteration: 1, MeanReturn: -9},
	{Phase: "bc", Iteration: 2, MeanReturn: -8, Eval: 0.40, EvalSet: true},
	{Phase: "ppo", Iteration: 1, MeanReturn: -3, Eval: 0.50, EvalSet: true},
	{Phase: "ppo", Iteration: 2, MeanReturn: -2},
	{Phase: "ppo", Iteration: 3, MeanReturn: -1, Eval: 0.55, EvalSet: true},
}

func TestPoints(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rows           []ppo.Row
		returns, evals plotter.XYs
	}{
		{"empty", nil, nil, nil},
		// cloning returns are not PPO returns: left out; the cloned
		// start's evaluation is drawn at iteration 0
		{"run", history,
			plotter.XYs{{X: 1, Y: -3}, {X: 2, Y: -2}, {X: 3, Y: -1}},
			plotter.XYs{{X: 0, Y: 0.40}, {X: 1, Y: 0.50}, {X: 3, Y: 0.55}}},
		{"cloning only", history[:2], nil, plotter.XYs{{X: 0, Y: 0.40}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, e := Points(tc.rows)
			if !equal(r, tc.returns) || !equal(e, tc.evals) {
				t.Fatalf("Points = %v, %v; want %v, %v", r, e, tc.returns, tc.evals)
			}
		})
	}
}

func equal(a, b plotter.XYs) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWrite draws real PNGs: two stacked 7 x 3.2 inch panels at vgimg's
// 96 dpi are 672 x 614 pixels (7*96 = 672; 2*3.2*96 = 614.4, truncated).
func TestWrite(t *testing.T) {
	cfg := ppo.DefaultConfig()
	cfg.Name = "unit"
	for _, tc := range []struct {
		name string
		rows []ppo.Row
	}{{"run", history}, {"no rows: grids only", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), File)
			if err := Write(path, cfg, tc.rows); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.DecodeConfig(f)
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if img.Width != 672 || img.Height != 614 {
				t.Fatalf("size %dx%d, want 672x614", img.Width, img.Height)
			}
		})
	}
}

func TestWriteUnwritable(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "missing-dir", File), ppo.DefaultConfig(), history)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want a missing-directory error", err)
	}
}
