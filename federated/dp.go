package federated

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// DPConfig configures client-level differential privacy for the aggregate
// (see DefaultDPConfig), in the style of DP-FedAvg (McMahan et al. 2018)
// with full participation and the Gaussian mechanism. One round goes:
//
//  1. every site's delta is clipped to L2 norm C: ClipL2(delta, C);
//  2. the n clipped deltas are averaged without sample weights (fedavg
//     with Weight 1 for every contribution: sample weights would change
//     the sensitivity), so their sum has sensitivity C when one site is
//     added or removed;
//  3. AddNoise adds N(0, (z*C)^2) to the sum, i.e. N(0, (z*C/n)^2) to the
//     mean;
//  4. Accountant.Step records the round; Accountant.Epsilon reports the
//     privacy loss so far.
//
// The number of contributions n is treated as public. The noise comes from
// the *rand.Rand the caller passes: in production it must be seeded
// unpredictably (e.g. rand.NewChaCha8 with a seed from crypto/rand), or
// the guarantee is void. Like most implementations, this ignores attacks
// on floating-point Gaussian sampling (Mironov 2012).
type DPConfig struct {
	// ClipNorm C > 0: every contribution is clipped to this L2 norm
	// (sensitivity of the sum).
	ClipNorm float64
	// NoiseMultiplier z > 0: Gaussian noise with std z*C is added to the
	// SUM of clipped deltas before dividing by the number of contributions.
	NoiseMultiplier float64
	// Delta is the target delta for reporting epsilon, in (0, 1), default
	// 1e-5.
	Delta float64
}

// DefaultDPConfig is C = 1, z = 1, delta = 1e-5. C should be set near the
// median norm of the sites' unclipped deltas, and z from the privacy
// budget (see Accountant).
func DefaultDPConfig() DPConfig {
	return DPConfig{ClipNorm: 1, NoiseMultiplier: 1, Delta: 1e-5}
}

// Validate names the first field out of range; errors wrap ErrConfig.
func (c DPConfig) Validate() error {
	switch {
	case !(c.ClipNorm > 0) || math.IsInf(c.ClipNorm, 1):
		return fmt.Errorf("%w: DP ClipNorm %v, want finite and > 0", ErrConfig, c.ClipNorm)
	case !(c.NoiseMultiplier > 0) || math.IsInf(c.NoiseMultiplier, 1):
		return fmt.Errorf("%w: DP NoiseMultiplier %v, want finite and > 0", ErrConfig, c.NoiseMultiplier)
	case !(c.Delta > 0 && c.Delta < 1):
		return fmt.Errorf("%w: DP Delta %v, want in (0, 1)", ErrConfig, c.Delta)
	}
	return nil
}

// NoiseStd is the standard deviation AddNoise adds to each coordinate of
// the mean of n clipped deltas: z*C/n.
func (c DPConfig) NoiseStd(n int) float64 {
	return c.NoiseMultiplier * c.ClipNorm / float64(n)
}

// AddNoise adds N(0, (z*C/n)^2) to each coordinate of an averaged delta
// (i.e. noise z*C on the sum of n clipped deltas, then divided by n), with
// a seeded *rand.Rand. The noise is drawn in coordinate order, so the same
// rng state gives the same result. It refuses (leaving avg unchanged) an
// invalid c (ErrConfig), n < 1 or a nil rng (ErrAggregate): noise silently
// not added would be a privacy failure.
func AddNoise(avg []float32, n int, c DPConfig, rng *rand.Rand) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w: DP noise for %d contributions, want >= 1", ErrAggregate, n)
	}
	if rng == nil {
		return fmt.Errorf("%w: DP noise without a random source", ErrAggregate)
	}
	std := c.NoiseStd(n)
	for i, v := range avg {
		avg[i] = float32(float64(v) + std*rng.NormFloat64())
	}
	return nil
}

// The Rényi orders Accountant.Epsilon minimises over: alpha = k/100 for k
// from rdpOrderMin to rdpOrderMax, i.e. 1.25, 1.26, ..., 256.
const (
	rdpOrderMin = 125
	rdpOrderMax = 25600
)

// RDPOrders returns the Rényi orders Accountant.Epsilon minimises over:
// 1.25 to 256 in steps of 0.01 (25,476 orders).
func RDPOrders() []float64 {
	a := make([]float64, 0, rdpOrderMax-rdpOrderMin+1)
	for k := rdpOrderMin; k <= rdpOrderMax; k++ {
		a = append(a, float64(k)/100)
	}
	return a
}

// Accountant tracks the privacy loss of DP-FedAvg over rounds with Rényi
// differential privacy (Mironov 2017) of the Gaussian mechanism: one round
// with noise multiplier z is (alpha, alpha/(2 z^2))-RDP at every order
// alpha > 1; R rounds compose to R*alpha/(2 z^2); and (alpha, rho)-RDP
// implies (rho + log(1/delta)/(alpha-1), delta)-DP. Epsilon is the minimum
// of that over the orders of RDPOrders.
//
// This is an RDP bound for full participation (every site in every round)
// without amplification by subsampling, and with the classic conversion:
// it is conservative. Not safe for concurrent use.
type Accountant struct {
	c      DPConfig
	rounds int
}

// NewAccountant starts an accountant at zero rounds. With an invalid c
// (see DPConfig.Validate) Epsilon reports +Inf.
func NewAccountant(c DPConfig) *Accountant {
	return &Accountant{c: c}
}

// Step records one round (one noisy aggregate released).
func (a *Accountant) Step() { a.rounds++ }

// Rounds is the number of rounds recorded.
func (a *Accountant) Rounds() int { return a.rounds }

// Epsilon returns the epsilon of (epsilon, c.Delta)-DP after the recorded
// rounds and the Rényi order that attains it (the lowest such order on a
// tie). Before any round it returns (0, 0): nothing was released. With an
// invalid configuration it returns (+Inf, 0).
func (a *Accountant) Epsilon() (eps float64, alpha float64) {
	if a.c.Validate() != nil {
		return math.Inf(1), 0
	}
	if a.rounds == 0 {
		return 0, 0
	}
	z := a.c.NoiseMultiplier
	perOrder := float64(a.rounds) / (2 * z * z) // RDP at order alpha is perOrder * alpha
	logInvDelta := -math.Log(a.c.Delta)
	eps = math.Inf(1)
	for k := rdpOrderMin; k <= rdpOrderMax; k++ {
		al := float64(k) / 100
		if e := perOrder*al + logInvDelta/(al-1); e < eps {
			eps, alpha = e, al
		}
	}
	return eps, alpha
}
