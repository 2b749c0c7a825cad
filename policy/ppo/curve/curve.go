package curve

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/edgesched/edgesched/policy/ppo"
	"github.com/edgesched/edgesched/sim/report"
)

// File is the curve's file name in a training run's output directory.
const File = "training_curve.png"

// Panel sizes: two panels stacked, 7 x 3.2 inches each.
const (
	panelWidth  = 7 * vg.Inch
	panelHeight = 3.2 * vg.Inch
)

// Write draws the curve of rows (ppo.Result.History, one row per cloning
// epoch and PPO iteration) as a PNG at path: the mean training-episode
// return per PPO iteration, and cfg's evaluation measure where it was
// taken. Cloning rows are drawn at iteration 0 (the behaviour-cloned
// start) and only in the evaluation panel. An empty panel is drawn with
// its grid only.
func Write(path string, cfg ppo.Config, rows []ppo.Row) error {
	ret := plot.New()
	ret.Title.Text = cfg.Name + ": mean training-episode return"
	ret.X.Label.Text = "PPO iteration"
	ret.Y.Label.Text = "return"
	ev := plot.New()
	ev.Title.Text = "evaluation: " + cfg.Eval.Measure + " (greedy, seeds " + fmt.Sprint(cfg.Eval.Seeds) + ")"
	ev.X.Label.Text = "PPO iteration"
	ev.Y.Label.Text = cfg.Eval.Measure
	rxy, exy := Points(rows)
	for _, s := range []struct {
		p  *plot.Plot
		xy plotter.XYs
	}{{ret, rxy}, {ev, exy}} {
		s.p.Add(plotter.NewGrid())
		if len(s.xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return fmt.Errorf("plot training curve: %w", err)
		}
		s.p.Add(l, pts)
	}
	return report.SavePanels(path, panelWidth, panelHeight, ret, ev)
}

// Points are the curve's two series: returns (PPO rows only, at their
// iteration) and evaluations (every row with EvalSet, cloning rows at
// iteration 0).
func Points(rows []ppo.Row) (returns, evals plotter.XYs) {
	for _, r := range rows {
		it := float64(r.Iteration)
		if r.Phase != "ppo" {
			it = 0
		} else {
			returns = append(returns, plotter.XY{X: it, Y: r.MeanReturn})
		}
		if r.EvalSet {
			evals = append(evals, plotter.XY{X: it, Y: r.Eval})
		}
	}
	return returns, evals
}
