package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"
)

// WriteVersus prints, for every policy other than base, a "before / after
// / change" table against base: the mean of each measure over the runs,
// and the relative change ((after - before) / before). Where the two
// policies ran on the same seeds and workloads (two pairs or more), it adds
// the paired figures (Document.Paired): the mean per-run relative change
// with its standard error, the mean difference with its standard error,
// and on how many pairs the policy's value is lower.
func (d *Document) WriteVersus(w io.Writer, base string, columns []string) error {
	if !slices.Contains(d.Policies(), base) {
		return fmt.Errorf("%w: %q is not among the policies run", ErrReport, base)
	}
	for _, p := range d.Policies() {
		if p == base {
			continue
		}
		fmt.Fprintf(w, "\n%s versus %s", p, base)
		if n := d.pairCount(base, p); n >= 2 {
			fmt.Fprintf(w, " (paired over %d runs on the same seeds and workloads; standard errors in brackets)", n)
		}
		fmt.Fprintln(w, ":")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "measure\tbefore ("+base+")\tafter\tchange\tper-run change\tdifference\tlower\t")
		for _, c := range columns {
			b, nb := d.Mean(base, c)
			a, na := d.Mean(p, c)
			change := "-"
			switch {
			case nb == 0 || na == 0:
			case b == 0 && a == 0:
				change = "0%"
			case b != 0:
				change = fmt.Sprintf("%+.0f%%", 100*(a-b)/math.Abs(b))
			}
			rel, diff, lower := "-", "-", "-"
			if ps := d.Paired(base, p, c); ps.N >= 2 {
				diff = formatDiff(c, ps.Diff, ps.DiffSE)
				lower = fmt.Sprintf("%d/%d", ps.Lower, ps.N)
				if ps.RelN == ps.N {
					rel = fmt.Sprintf("%+.1f%% (%.1f)", 100*ps.Rel, 100*ps.RelSE)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, formatMeasure(c, b, nb), formatMeasure(c, a, na), change, rel, diff, lower)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// PairedStat compares a policy with a base run for run: the runs of both
// with the same seed and workload (Run.Seed, Run.ScenarioSeed) that both
// report the measure. The standard errors are the sample standard
// deviation over sqrt(N), zero when N < 2; the means are NaN without a
// pair.
type PairedStat struct {
	// N is the number of pairs.
	N int
	// Diff is the mean of policy minus base over the pairs.
	Diff, DiffSE float64
	// Rel is the mean relative change (policy - base) / |base| over the
	// RelN pairs whose base value is not zero.
	Rel, RelSE float64
	RelN       int
	// Lower counts the pairs where the policy's value is below base's.
	Lower int
}

type runKey struct{ seed, scenarioSeed uint64 }

// pairs returns the measure's (base, policy) values on the seeds and
// workloads both ran once; a key either ran more than once is left out.
func (d *Document) pairs(base, policy, measure string) [][2]float64 {
	type slot struct {
		v    [2]float64
		seen [2]int
		has  [2]bool
	}
	slots := map[runKey]*slot{}
	var order []runKey
	for _, r := range d.Runs {
		side := -1
		switch r.Policy {
		case base:
			side = 0
		case policy:
			side = 1
		}
		if side < 0 {
			continue
		}
		k := runKey{r.Seed, r.ScenarioSeed}
		s := slots[k]
		if s == nil {
			s = &slot{}
			slots[k] = s
			order = append(order, k)
		}
		s.seen[side]++
		v, ok := r.Measures[measure]
		s.v[side], s.has[side] = v, ok || measure == ""
	}
	var out [][2]float64
	for _, k := range order {
		if s := slots[k]; s.seen == [2]int{1, 1} && s.has == [2]bool{true, true} {
			out = append(out, s.v)
		}
	}
	return out
}

// pairCount is the number of seeds and workloads both policies ran once.
func (d *Document) pairCount(base, policy string) int { return len(d.pairs(base, policy, "")) }

// Paired returns the paired comparison of policy against base on one
// measure (PairedStat).
func (d *Document) Paired(base, policy, measure string) PairedStat {
	var ps PairedStat
	var diffs, rels []float64
	for _, p := range d.pairs(base, policy, measure) {
		b, a := p[0], p[1]
		diffs = append(diffs, a-b)
		if b != 0 {
			rels = append(rels, (a-b)/math.Abs(b))
		}
		if a < b {
			ps.Lower++
		}
	}
	ps.N, ps.RelN = len(diffs), len(rels)
	ps.Diff, ps.DiffSE = meanSE(diffs)
	ps.Rel, ps.RelSE = meanSE(rels)
	return ps
}

// meanSE is the mean of xs and its standard error (0 with fewer than two).
func meanSE(xs []float64) (mean, se float64) {
	switch len(xs) {
	case 0:
		return math.NaN(), 0
	case 1:
		return xs[0], 0
	}
	mean, sd := stat.MeanStdDev(xs, nil)
	return mean, sd / math.Sqrt(float64(len(xs)))
}

// formatDiff prints a paired difference in the measure's units (shares
// as percentage points).
func formatDiff(name string, v, se float64) string {
	if f := formatMeasure(name, v, 1); strings.HasSuffix(f, "%") {
		return fmt.Sprintf("%+.2f pts (%.2f)", 100*v, 100*se)
	}
	return fmt.Sprintf("%+.1f (%.1f)", v, se)
}

// Versus is the paired comparison of every policy against one (`edgectl
// sim --versus` adds it to the document): Document.Paired of every
// measure the runs report, for the policies with two pairs or more.
type Versus struct {
	Base     string         `json:"base"`
	Policies []VersusPolicy `json:"policies"`
}

// VersusPolicy is one policy's paired comparison against Versus.Base.
type VersusPolicy struct {
	Policy string `json:"policy"`
	// Pairs is the number of seeds and workloads both ran once.
	Pairs    int                      `json:"pairs"`
	Measures map[string]PairedFigures `json:"measures"`
}

// PairedFigures is PairedStat as the JSON document carries it: the
// relative change is left out when a base value was zero or it is not
// finite (a base next to zero), and so is a measure whose difference is
// not.
type PairedFigures struct {
	N      int      `json:"n"`
	Diff   float64  `json:"diff"`
	DiffSE float64  `json:"diff_se"`
	Rel    *float64 `json:"rel,omitempty"`
	RelSE  *float64 `json:"rel_se,omitempty"`
	Lower  int      `json:"lower"`
}

// AddVersus sets d.Versus to the paired comparison of every other policy
// against base.
func (d *Document) AddVersus(base string) error {
	if !slices.Contains(d.Policies(), base) {
		return fmt.Errorf("%w: %q is not among the policies run", ErrReport, base)
	}
	v := &Versus{Base: base, Policies: []VersusPolicy{}}
	names := d.measureNames()
	for _, p := range d.Policies() {
		if p == base {
			continue
		}
		vp := VersusPolicy{Policy: p, Pairs: d.pairCount(base, p), Measures: map[string]PairedFigures{}}
		for _, m := range names {
			ps := d.Paired(base, p, m)
			if ps.N < 2 || !finite(ps.Diff, ps.DiffSE) { // JSON has no NaN or Inf
				continue
			}
			f := PairedFigures{N: ps.N, Diff: ps.Diff, DiffSE: ps.DiffSE, Lower: ps.Lower}
			if ps.RelN == ps.N && finite(ps.Rel, ps.RelSE) {
				f.Rel, f.RelSE = &ps.Rel, &ps.RelSE
			}
			vp.Measures[m] = f
		}
		v.Policies = append(v.Policies, vp)
	}
	d.Versus = v
	return nil
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
