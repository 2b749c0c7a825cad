package ppo

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/edgesched/edgesched/sim/report"
)

func writeHistory(path string, rows []Row) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"phase", "iteration", "episodes", "mean_return", "policy_loss", "value_loss", "entropy", "kl", "eval", "seconds"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, r := range rows {
		ev := ""
		if r.EvalSet {
			ev = g(r.Eval)
		}
		_ = w.Write([]string{r.Phase, strconv.Itoa(r.Iteration), strconv.Itoa(r.Episodes), g(r.MeanReturn), g(r.PolicyLoss), g(r.ValueLoss), g(r.Entropy), g(r.KL), ev, g(r.Seconds)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("write history: %w", err)
	}
	return f.Close()
}

// plotCurve draws the training curve: PPO's mean episode return per
// iteration, and the evaluation measure where it was taken (iteration 0 is
// the behaviour-cloned start).
func plotCurve(path string, cfg Config, rows []Row) error {
	ret := plot.New()
	ret.Title.Text = cfg.Name + ": mean training-episode return"
	ret.X.Label.Text = "PPO iteration"
	ret.Y.Label.Text = "return"
	ev := plot.New()
	ev.Title.Text = "evaluation: " + cfg.Eval.Measure + " (greedy, seeds " + fmt.Sprint(cfg.Eval.Seeds) + ")"
	ev.X.Label.Text = "PPO iteration"
	ev.Y.Label.Text = cfg.Eval.Measure
	var rxy, exy plotter.XYs
	for _, r := range rows {
		it := float64(r.Iteration)
		if r.Phase != "ppo" {
			it = 0
		} else {
			rxy = append(rxy, plotter.XY{X: it, Y: r.MeanReturn})
		}
		if r.EvalSet {
			exy = append(exy, plotter.XY{X: it, Y: r.Eval})
		}
	}
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
	return report.SavePanels(path, 7*vg.Inch, 3.2*vg.Inch, ret, ev)
}
