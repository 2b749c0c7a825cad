package federated

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/edgesched/edgesched/internal/parallel"
)

// store keeps a copy of every contribution: the robust rules need them
// all at once (O(contributions x parameters) memory). Sample weights and
// staleness are validated but not used by these rules: a Byzantine site
// could claim any weight.
type store struct {
	dim   int
	rows  [][]float32
	sites []string
}

func (s *store) Streaming() bool { return false }
func (s *store) Count() int      { return len(s.rows) }

func (s *store) Add(c Contribution) error {
	if _, err := checkContribution(c, s.dim); err != nil {
		return err
	}
	s.dim = len(c.Delta)
	s.rows = append(s.rows, slices.Clone(c.Delta))
	s.sites = append(s.sites, c.Site)
	return nil
}

// columnBlock is how many coordinates columns gathers at a time: the
// block (columnBlock x contributions float32s) stays in cache while the
// rows are read sequentially.
const columnBlock = 128

// columns calls fn for every coordinate i with the contributions' values
// of that coordinate (fn may reorder col but not keep it). With sorted the
// values come sorted ascending; otherwise in contribution order. Blocks of
// coordinates are handed to GOMAXPROCS goroutines: fn is called
// concurrently, for distinct i (each call's result depends on its column
// alone, so the output does not depend on the scheduling).
func (s *store) columns(sorted bool, fn func(i int, col []float32)) {
	n := len(s.rows)
	workers := runtime.GOMAXPROCS(0)
	bufs := make([][]float32, workers)
	for w := range bufs {
		bufs[w] = make([]float32, columnBlock*n)
	}
	// worker w takes the blocks w, w+workers, ...: one buffer each
	parallel.For(workers, workers, func(w int) {
		buf := bufs[w]
		for i0 := w * columnBlock; i0 < s.dim; i0 += workers * columnBlock {
			width := min(columnBlock, s.dim-i0)
			for j, r := range s.rows {
				for b, v := range r[i0 : i0+width] {
					buf[b*n+j] = v
				}
			}
			for b := range width {
				col := buf[b*n : (b+1)*n]
				if sorted {
					slices.Sort(col)
				}
				fn(i0+b, col)
			}
		}
	})
}

// selectKth reorders v so that v[k] is the value a sort would put there,
// with nothing larger before it and nothing smaller after it
// (deterministic quickselect, median-of-three pivots; v holds no NaN).
func selectKth(v []float32, k int) float32 {
	lo, hi := 0, len(v)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// median of three to v[mid]
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}

// medianAggregator is the coordinate-wise median (see NewAggregator).
type medianAggregator struct{ store }

func (a *medianAggregator) Name() string { return RuleMedian }

func (a *medianAggregator) Result() (Result, error) {
	n := len(a.rows)
	if n == 0 {
		return Result{}, fmt.Errorf("%w: median: no contributions", ErrAggregate)
	}
	out := make([]float32, a.dim)
	a.columns(false, func(i int, col []float32) {
		hi := selectKth(col, n/2)
		if n%2 == 1 {
			out[i] = hi
			return
		}
		// the largest of the lower half is the other middle value
		lo := slices.Max(col[:n/2])
		out[i] = float32((float64(lo) + float64(hi)) / 2)
	})
	return Result{Delta: out, Used: slices.Clone(a.sites), Stats: map[string]float64{"count": float64(n)}}, nil
}

// trimmedMeanAggregator is the coordinate-wise trimmed mean (see
// NewAggregator).
type trimmedMeanAggregator struct {
	store
	beta float64
}

func (a *trimmedMeanAggregator) Name() string { return RuleTrimmedMean }

// TrimCount is the number of values the trimmed mean drops from each end
// of a coordinate's n sorted values: ceil(beta*n), computed with a 1e-9
// tolerance so that a product that should be whole is not rounded up by
// representation error (0.07*100 is 7.000000000000001 in float64: 7, not 8).
func TrimCount(beta float64, n int) int {
	return max(0, int(math.Ceil(beta*float64(n)-1e-9)))
}

func (a *trimmedMeanAggregator) Result() (Result, error) {
	n := len(a.rows)
	if n == 0 {
		return Result{}, fmt.Errorf("%w: trimmed-mean: no contributions", ErrAggregate)
	}
	k := TrimCount(a.beta, n)
	if 2*k >= n {
		return Result{}, fmt.Errorf("%w: trimmed-mean with beta %v drops %d values from each end of n = %d, leaving none (need 2*ceil(beta*n) < n)", ErrAggregate, a.beta, k, n)
	}
	out := make([]float32, a.dim)
	kept := float64(n - 2*k)
	a.columns(true, func(i int, col []float32) {
		var s float64
		for _, v := range col[k : n-k] {
			s += float64(v)
		}
		out[i] = float32(s / kept)
	})
	return Result{Delta: out, Used: slices.Clone(a.sites), Stats: map[string]float64{
		"count":          float64(n),
		"trimmed_each":   float64(k),
		"kept_per_coord": kept,
	}}, nil
}

// krumAggregator is Krum and Multi-Krum (see NewAggregator). Scoring
// takes O(n^2) extra memory for the distances.
type krumAggregator struct {
	store
	name  string
	f     int  // Byzantine contributions tolerated
	m     int  // contributions averaged (Krum: 1; Multi-Krum: 0 = n - f)
	multi bool // Multi-Krum
}

func (a *krumAggregator) Name() string { return a.name }

func (a *krumAggregator) Result() (Result, error) {
	n, f := len(a.rows), a.f
	if n == 0 {
		return Result{}, fmt.Errorf("%w: %s: no contributions", ErrAggregate, a.name)
	}
	if n <= 2*f+2 {
		return Result{}, fmt.Errorf("%w: %s needs n > 2f+2 contributions, has n = %d with f = %d (2f+2 = %d)", ErrAggregate, a.name, n, f, 2*f+2)
	}
	m := a.m
	if a.multi && m == 0 {
		m = n - f
	}
	if m > n-f {
		return Result{}, fmt.Errorf("%w: %s averages m = %d contributions, more than n - f = %d - %d", ErrAggregate, a.name, m, n, f)
	}
	scores := krumScores(a.rows, n-f-2)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(scores[i], scores[j]) })
	chosen := order[:m]

	out := make([]float32, a.dim)
	if m == 1 {
		copy(out, a.rows[chosen[0]])
	} else {
		// Sum in Add order, whatever the scores' order.
		byIndex := slices.Sorted(slices.Values(chosen))
		acc := make([]float64, a.dim)
		for _, j := range byIndex {
			for i, v := range a.rows[j] {
				acc[i] += float64(v)
			}
		}
		for i, s := range acc {
			out[i] = float32(s / float64(m))
		}
	}
	used := make([]string, m)
	for k, j := range chosen {
		used[k] = a.sites[j]
	}
	stats := map[string]float64{
		"count":           float64(n),
		"krum_f":          float64(f),
		"krum_selected":   float64(m),
		"krum_neighbours": float64(n - f - 2),
		"krum_score_min":  scores[order[0]],
		"krum_score_max":  scores[order[n-1]],
		"krum_score_cut":  scores[order[m-1]], // the worst chosen score
	}
	if m < n {
		stats["krum_score_rejected_min"] = scores[order[m]] // the best score left out
	}
	return Result{Delta: out, Used: used, Stats: stats}, nil
}

// krumScores returns, for every row, the sum of its k smallest squared L2
// distances to the other rows.
func krumScores(rows [][]float32, k int) []float64 {
	n := len(rows)
	dist := make([]float64, n*n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			d := sqDist(rows[i], rows[j])
			dist[i*n+j], dist[j*n+i] = d, d
		}
	}
	scores := make([]float64, n)
	others := make([]float64, 0, n-1)
	for i := range n {
		others = others[:0]
		for j := range n {
			if j != i {
				others = append(others, dist[i*n+j])
			}
		}
		slices.Sort(others)
		var s float64
		for _, d := range others[:k] {
			s += d
		}
		scores[i] = s
	}
	return scores
}

// sqDist is the squared L2 distance of two equal-length vectors, in
// float64.
func sqDist(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0 := float64(a[i]) - float64(b[i])
		d1 := float64(a[i+1]) - float64(b[i+1])
		d2 := float64(a[i+2]) - float64(b[i+2])
		d3 := float64(a[i+3]) - float64(b[i+3])
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := float64(a[i]) - float64(b[i])
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}
