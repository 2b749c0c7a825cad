package federated

import (
	"errors"
	"fmt"
	"math"
)

// Sentinel errors of the aggregation rules.
var (
	// ErrContribution: a contribution was refused by Aggregator.Add.
	ErrContribution = errors.New("federated: bad contribution")
	// ErrAggregate: Aggregator.Result (or AddNoise) cannot produce a result
	// from what it was given.
	ErrAggregate = errors.New("federated: cannot aggregate")
	// ErrConfig: an AggregatorConfig or DPConfig field is out of range.
	ErrConfig = errors.New("federated: bad configuration")
)

// Aggregation rule names, the values of AggregatorConfig.Rule.
const (
	RuleFedAvg      = "fedavg"
	RuleFedBuff     = "fedbuff"
	RuleMedian      = "median"
	RuleTrimmedMean = "trimmed-mean"
	RuleKrum        = "krum"
	RuleMultiKrum   = "multi-krum"
)

// Contribution is one site's validated update for aggregation.
type Contribution struct {
	Site      string    // site ID (for logs and Krum's choice report)
	Delta     []float32 // weight delta in nn.Model.Flat order
	Weight    float64   // sample weight (e.g. decisions trained on), > 0
	Staleness int       // rounds between the model it was trained from and the current one (0 = fresh)
}

// Aggregator combines contributions into one delta. Not safe for
// concurrent use.
type Aggregator interface {
	// Name is the rule's name (AggregatorConfig.Rule).
	Name() string
	// Streaming reports whether the rule keeps O(parameters) memory however
	// many contributions are added.
	Streaming() bool
	// Add validates (length equals the first contribution's / the
	// configured dimension, all values finite, weight finite and > 0,
	// staleness >= 0) and takes one contribution. Errors wrap
	// ErrContribution and name the problem and site; nothing is changed on
	// error. Add never keeps c.Delta: the caller may reuse it.
	Add(c Contribution) error
	// Count is the number of contributions added.
	Count() int
	// Result returns the aggregated delta. Errors wrap ErrAggregate (e.g.
	// no contributions, Krum with too few). Result does not change the
	// aggregator: more contributions may be added afterwards.
	Result() (Result, error)
}

// Result is an aggregated delta.
type Result struct {
	// Delta is the aggregated delta, newly allocated.
	Delta []float32
	// Used lists the sites whose contributions entered the result (all of
	// them for FedAvg; the chosen ones for Krum/Multi-Krum; for
	// median/trimmed mean all of them).
	Used []string
	// Stats: free-form figures ("weight_total", "krum_score_min", ...).
	Stats map[string]float64
}

// AggregatorConfig chooses and parameterises a rule. Start from
// DefaultAggregatorConfig(); Validate() names the first bad field.
type AggregatorConfig struct {
	// Rule is "fedavg" (default; "" means fedavg too), "fedbuff",
	// "median", "trimmed-mean", "krum" or "multi-krum".
	Rule string
	// TrimBeta: trimmed mean drops the ceil(beta*n) largest and smallest
	// values per coordinate; 0 <= beta < 0.5 (default 0.1).
	TrimBeta float64
	// Byzantine f for Krum/Multi-Krum (default 1); Krum refuses to run
	// unless n > 2f+2 (n = contributions).
	Byzantine int
	// MultiKrumM: Multi-Krum averages the m best-scored contributions
	// (default 0 = n - f); m must not exceed n - f.
	MultiKrumM int
	// StalenessExponent a: FedBuff weights a contribution by
	// weight * (1 + staleness)^(-a) (default 0.5); a >= 0.
	StalenessExponent float64
}

// DefaultAggregatorConfig is FedAvg, with the defaults of every other
// rule's parameters filled in.
func DefaultAggregatorConfig() AggregatorConfig {
	return AggregatorConfig{
		Rule:              RuleFedAvg,
		TrimBeta:          0.1,
		Byzantine:         1,
		MultiKrumM:        0,
		StalenessExponent: 0.5,
	}
}

// Validate names the first field out of range; errors wrap ErrConfig. All
// fields are checked whatever the rule.
func (c AggregatorConfig) Validate() error {
	switch c.Rule {
	case "", RuleFedAvg, RuleFedBuff, RuleMedian, RuleTrimmedMean, RuleKrum, RuleMultiKrum:
	default:
		return fmt.Errorf("%w: Rule %q, want fedavg, fedbuff, median, trimmed-mean, krum or multi-krum", ErrConfig, c.Rule)
	}
	if !(c.TrimBeta >= 0 && c.TrimBeta < 0.5) {
		return fmt.Errorf("%w: TrimBeta %v, want 0 <= beta < 0.5", ErrConfig, c.TrimBeta)
	}
	if c.Byzantine < 0 {
		return fmt.Errorf("%w: Byzantine %d, want >= 0", ErrConfig, c.Byzantine)
	}
	if c.MultiKrumM < 0 {
		return fmt.Errorf("%w: MultiKrumM %d, want >= 0 (0 = n - f)", ErrConfig, c.MultiKrumM)
	}
	if !(c.StalenessExponent >= 0) || math.IsInf(c.StalenessExponent, 1) {
		return fmt.Errorf("%w: StalenessExponent %v, want finite and >= 0", ErrConfig, c.StalenessExponent)
	}
	return nil
}

// NewAggregator returns an empty aggregator for c.Rule. dim > 0 is the
// parameter count; 0 means "taken from the first contribution".
//
// The rules:
//   - fedavg (McMahan et al. 2017): the sample-weighted mean
//     sum(w_i d_i) / sum(w_i); staleness is ignored. Streaming: a float64
//     running sum and weight total (and the site IDs for Result.Used).
//     FedProx (Li et al. 2020) aggregates with fedavg on the server: its
//     proximal term lives in client training.
//   - fedbuff (Nguyen et al. 2022, buffered asynchronous aggregation):
//     fedavg with each weight multiplied by (1 + staleness)^(-a).
//     Streaming. The mean is normalised by the discounted weights, so a
//     buffer whose updates are all equally stale still gets a full step;
//     the paper's server step (1/K) sum s(tau_i) d_i is, with equal
//     weights, Delta scaled by Stats["discount_mean"] (the weight-weighted
//     mean discount). Stats also has "staleness_mean" and "staleness_max".
//   - median (Yin et al. 2018): the coordinate-wise median, the mean of the
//     two middle values for an even count.
//   - trimmed-mean (Yin et al. 2018): per coordinate, drop the
//     k = TrimCount(beta, n) largest and smallest values and average the
//     rest; refused if 2k >= n.
//   - krum (Blanchard et al. 2017): each contribution is scored by the sum
//     of its squared L2 distances (float64) to its n-f-2 nearest other
//     contributions; the lowest score wins and is returned as is. Refused
//     unless n > 2f+2. multi-krum averages (unweighted) the m lowest-scored
//     ones, m <= n-f. Ties go to the earlier Add; Result.Used lists the
//     chosen sites best score first. Scoring costs O(n^2 x parameters)
//     time.
//
// median, trimmed-mean, krum and multi-krum keep a copy of every
// contribution (not streaming) and ignore sample weights and staleness: a
// Byzantine site could claim any weight. Every rule is deterministic: the
// same contributions in the same order give a bit-identical Result.
//
// Result.Stats: every rule has "count"; fedavg and fedbuff "weight_total"
// (fedbuff's after the discount, and "sample_weight_total" before it);
// trimmed-mean "trimmed_each" (k) and "kept_per_coord"; krum and
// multi-krum "krum_f", "krum_neighbours" (n-f-2), "krum_selected" (m),
// "krum_score_min", "krum_score_max", "krum_score_cut" (the worst chosen
// score) and, when some were left out, "krum_score_rejected_min".
func NewAggregator(c AggregatorConfig, dim int) (Aggregator, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if dim < 0 {
		return nil, fmt.Errorf("%w: dimension %d, want > 0 (or 0: from the first contribution)", ErrConfig, dim)
	}
	switch c.Rule {
	case "", RuleFedAvg:
		return &meanAggregator{name: RuleFedAvg, dim: dim}, nil
	case RuleFedBuff:
		return &meanAggregator{name: RuleFedBuff, fedbuff: true, exponent: c.StalenessExponent, dim: dim}, nil
	case RuleMedian:
		return &medianAggregator{store{dim: dim}}, nil
	case RuleTrimmedMean:
		return &trimmedMeanAggregator{store: store{dim: dim}, beta: c.TrimBeta}, nil
	case RuleKrum:
		return &krumAggregator{store: store{dim: dim}, name: RuleKrum, f: c.Byzantine, m: 1}, nil
	default: // RuleMultiKrum, by Validate
		return &krumAggregator{store: store{dim: dim}, name: RuleMultiKrum, f: c.Byzantine, m: c.MultiKrumM, multi: true}, nil
	}
}

// checkContribution validates c against dimension dim (0: any non-empty
// length) and returns the largest magnitude among its values.
func checkContribution(c Contribution, dim int) (maxAbs float64, err error) {
	switch {
	case len(c.Delta) == 0:
		return 0, fmt.Errorf("%w: site %q: empty delta", ErrContribution, c.Site)
	case dim > 0 && len(c.Delta) != dim:
		return 0, fmt.Errorf("%w: site %q: delta has %d values, want %d", ErrContribution, c.Site, len(c.Delta), dim)
	case !(c.Weight > 0) || math.IsInf(c.Weight, 1):
		return 0, fmt.Errorf("%w: site %q: weight %v, want finite and > 0", ErrContribution, c.Site, c.Weight)
	case c.Staleness < 0:
		return 0, fmt.Errorf("%w: site %q: staleness %d is negative", ErrContribution, c.Site, c.Staleness)
	}
	// For finite floats, the magnitude orders as the bits without the sign;
	// NaN and ±Inf have all exponent bits set and sort above every finite
	// value.
	m := maxMagnitudeBits(c.Delta)
	if m >= 0x7f80_0000 {
		for i, v := range c.Delta {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("%w: site %q: delta[%d] is %v", ErrContribution, c.Site, i, v)
			}
		}
	}
	return float64(math.Float32frombits(m)), nil
}

// maxMagnitudeBits is the largest of the values' bits without the sign
// (four independent maxima, for speed).
func maxMagnitudeBits(d []float32) uint32 {
	const abs = 0x7fff_ffff
	var m0, m1, m2, m3 uint32
	i := 0
	for ; i+4 <= len(d); i += 4 {
		m0 = max(m0, math.Float32bits(d[i])&abs)
		m1 = max(m1, math.Float32bits(d[i+1])&abs)
		m2 = max(m2, math.Float32bits(d[i+2])&abs)
		m3 = max(m3, math.Float32bits(d[i+3])&abs)
	}
	for ; i < len(d); i++ {
		m0 = max(m0, math.Float32bits(d[i])&abs)
	}
	return max(m0, m1, m2, m3)
}

// meanAggregator is fedavg and fedbuff (see NewAggregator): a float64
// running sum of weight * delta and the weight total, O(parameters)
// memory.
type meanAggregator struct {
	name     string
	fedbuff  bool
	exponent float64 // FedBuff's a

	dim     int
	sum     []float64 // sum of w_i * d_i, allocated by the first Add
	wTotal  float64   // sum of effective weights
	rawW    float64   // sum of sample weights (before the staleness discount)
	maxAbs  float64   // largest |value| seen: W * maxAbs bounds |sum|
	staleT  float64   // sum of staleness
	staleMx int
	sites   []string
}

func (a *meanAggregator) Name() string    { return a.name }
func (a *meanAggregator) Streaming() bool { return true }
func (a *meanAggregator) Count() int      { return len(a.sites) }

func (a *meanAggregator) Add(c Contribution) error {
	m, err := checkContribution(c, a.dim)
	if err != nil {
		return err
	}
	w := c.Weight
	if a.fedbuff {
		w *= math.Pow(1+float64(c.Staleness), -a.exponent)
		if !(w > 0) {
			return fmt.Errorf("%w: site %q: weight %v at staleness %d discounts to %v", ErrContribution, c.Site, c.Weight, c.Staleness, w)
		}
	}
	// The running sums must stay finite: |sum_i| <= W * max|d|.
	wt, raw, mx := a.wTotal+w, a.rawW+c.Weight, max(a.maxAbs, m)
	if math.IsInf(raw, 0) || math.IsInf(wt*mx, 0) {
		return fmt.Errorf("%w: site %q: weight %v overflows the running sum (weight total %v, largest value %v)", ErrContribution, c.Site, c.Weight, a.rawW, mx)
	}
	if a.sum == nil {
		a.dim = len(c.Delta)
		a.sum = make([]float64, a.dim)
	}
	accumulate(a.sum, c.Delta, w)
	a.wTotal, a.rawW, a.maxAbs = wt, raw, mx
	a.staleT += float64(c.Staleness)
	a.staleMx = max(a.staleMx, c.Staleness)
	a.sites = append(a.sites, c.Site)
	return nil
}

func (a *meanAggregator) Result() (Result, error) {
	n := len(a.sites)
	if n == 0 {
		return Result{}, fmt.Errorf("%w: %s: no contributions", ErrAggregate, a.name)
	}
	out := make([]float32, a.dim)
	for i, s := range a.sum {
		out[i] = float32(s / a.wTotal)
	}
	stats := map[string]float64{
		"count":        float64(n),
		"weight_total": a.wTotal,
	}
	if a.fedbuff {
		stats["sample_weight_total"] = a.rawW
		stats["discount_mean"] = a.wTotal / a.rawW
		stats["staleness_mean"] = a.staleT / float64(n)
		stats["staleness_max"] = float64(a.staleMx)
	}
	return Result{Delta: out, Used: append([]string(nil), a.sites...), Stats: stats}, nil
}

// accumulate adds w*d to sum (len(sum) == len(d)), four coordinates a step.
func accumulate(sum []float64, d []float32, w float64) {
	sum = sum[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		s := sum[i : i+4 : i+4]
		v := d[i : i+4 : i+4]
		s[0] += w * float64(v[0])
		s[1] += w * float64(v[1])
		s[2] += w * float64(v[2])
		s[3] += w * float64(v[3])
	}
	for ; i < len(d); i++ {
		sum[i] += w * float64(d[i])
	}
}
