package ppo

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
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
