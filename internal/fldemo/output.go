package fldemo

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/edgesched/edgesched/sim/report"
)

// Output files.
const (
	ResultsFile = "results.json"
	ReportFile  = "report.md"
	PlotFile    = "heldout_return.png"
)

// measureColumns are the simulator measures the second table shows,
// averaged over every site's held-out workloads.
var measureColumns = []struct{ key, header, format string }{
	{"pods_failed", "failed pods", "%.1f"},
	{"util_active_cpu_mean", "CPU util of active nodes", "%.1f%%"},
	{"cross_zone_traffic", "cross-zone traffic", "%.1f%%"},
	{"latency_p95_ms", "p95 latency proxy (ms)", "%.1f"},
}

// percent reports whether a measure is a share shown in percent.
func percent(key string) bool { return key == "util_active_cpu_mean" || key == "cross_zone_traffic" }

// WriteTables prints the held-out comparison as text tables.
func (r *Result) WriteTables(w io.Writer) error {
	return r.tables(w, false)
}

func (r *Result) tables(w io.Writer, md bool) error {
	sep, open, end := "\t", "", "\n"
	if md {
		sep, open, end = " | ", "| ", " |\n"
	}
	var b strings.Builder
	row := func(cells ...string) { b.WriteString(open + strings.Join(cells, sep) + end) }
	rule := func(n int) {
		if md {
			row(strings.Split(strings.Repeat("---,", n), ",")[:n]...)
		}
	}
	head := append([]string{"policy"}, r.Sites...)
	head = append(head, "mean")
	if !md {
		fmt.Fprintf(&b, "Mean return on each site's held-out workloads (generator seeds %v; higher is better):\n", r.HeldOut)
	}
	row(head...)
	rule(len(head))
	for _, p := range r.Policies {
		cells := []string{p}
		var sum float64
		for _, s := range r.Sites {
			v := r.Evals[p][s].Return
			sum += v
			cell := fmt.Sprintf("%.1f", v)
			if strings.TrimPrefix(p, LocalPrefix) == s {
				cell += "*"
			}
			cells = append(cells, cell)
		}
		row(append(cells, fmt.Sprintf("%.1f", sum/float64(len(r.Sites))))...)
	}
	if md {
		b.WriteString("\n")
	}
	b.WriteString("(* a site's own workloads: its local policy trained there)\n\n")
	if !md {
		b.WriteString("Averaged over all sites' held-out workloads:\n")
	}
	mh := []string{"policy"}
	for _, c := range measureColumns {
		mh = append(mh, c.header)
	}
	row(mh...)
	rule(len(mh))
	for _, p := range r.Policies {
		cells := []string{p}
		for _, c := range measureColumns {
			var sum float64
			for _, s := range r.Sites {
				sum += r.Evals[p][s].Measures[c.key]
			}
			v := sum / float64(len(r.Sites))
			if percent(c.key) {
				v *= 100
			}
			cells = append(cells, fmt.Sprintf(c.format, v))
		}
		row(cells...)
	}
	b.WriteString("\nFederated vs. each site's locally trained policy, on the OTHER sites' held-out workloads (mean return):\n\n")
	beats := 0
	for _, v := range r.Verdicts {
		mark := "federated better"
		if v.Beats {
			beats++
		} else {
			mark = "LOCAL BETTER"
		}
		fmt.Fprintf(&b, "%s  local:%-12s %8.1f   federated %8.1f   %s\n", bullet(md), v.Site, v.Local, v.Federated, mark)
	}
	fmt.Fprintf(&b, "\nThe federated policy beats %d of %d locally trained policies on the other sites' workloads.\n", beats, len(r.Verdicts))
	if md {
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if _, err := io.WriteString(tw, b.String()); err != nil {
		return err
	}
	return tw.Flush()
}

func bullet(md bool) string {
	if md {
		return "-"
	}
	return " "
}

// WriteFiles writes results.json, report.md and the plot into dir and
// returns their paths.
func (r *Result) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, ResultsFile), filepath.Join(dir, ReportFile), filepath.Join(dir, PlotFile)}
	if err := os.WriteFile(files[0], append(raw, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write results: %w", err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# edgesched federated demo\n\nSeed %d. %d sites (%s) trained a policy with PPO in their own simulated twins, starting from the same random network. "+
		"Federated: %d synchronous FedAvg rounds over NATS (each site %d PPO iterations x %d episodes per round; int8 updates; every global model quantized to int8 and signed, "+
		"verified and installed by every site: final version %d, int8 model %s). Local-only: each site trained alone for the same rounds. "+
		"All policies are evaluated greedily on every site's held-out workloads (scenario generator seeds %v, never trained on) with the training reward.\n\n",
		r.Seed, len(r.Sites), strings.Join(r.Sites, ", "), len(r.Rounds), r.Local.Iterations, r.Local.Episodes, r.FinalVersion, r.FinalInt8, r.HeldOut)
	if err := r.tables(&md, true); err != nil {
		return nil, err
	}
	fmt.Fprintf(&md, "\nTimings: federated rounds %.0fs, local-only training %.0fs, evaluation %.0fs, total %.0fs.\n\n![held-out return](%s)\n",
		r.Seconds["federated"], r.Seconds["local"], r.Seconds["evaluation"], r.Seconds["total"], PlotFile)
	if err := os.WriteFile(files[1], []byte(md.String()), 0o644); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	if err := r.plot(files[2]); err != nil {
		return nil, err
	}
	return files, nil
}

// plot draws the held-out return per site: one panel per site, one bar
// per policy (the sim plots' colours, in the policies' order), each
// labelled with its value.
func (r *Result) plot(path string) error {
	var panels []*plot.Plot
	for _, site := range r.Sites {
		vals := make([]float64, len(r.Policies))
		for i, pol := range r.Policies {
			vals[i] = r.Evals[pol][site].Return
		}
		p, err := report.BarPanel("site "+site+": held-out return (higher is better)", r.Policies, vals, func(v float64) string { return fmt.Sprintf("%.1f", v) })
		if err != nil {
			return err
		}
		p.X.Label.Text = "mean episode return"
		panels = append(panels, p)
	}
	h := vg.Points(90 + 18*float64(len(r.Policies)))
	if err := report.SaveGrid(path, 4.5*vg.Inch, h, min(2, len(panels)), nil, panels...); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}
