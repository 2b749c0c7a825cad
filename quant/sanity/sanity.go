package sanity

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
)

// ErrInsane wraps every sanity refusal.
var ErrInsane = errors.New("sanity: model fails the sanity check")

// SanityRows is the calibration set a loader without a scenario checks a
// model on: n raw feature rows, each feature drawn from a normal
// distribution with the schema's mean and standard deviation (the
// statistics the model normalises with), from a fixed seed (the same rows
// on every call).
func Rows(s policy.Schema, n int) []float32 {
	rng := rand.New(rand.NewPCG(0x5a17, 0xca1))
	f := len(s.Mean)
	rows := make([]float32, n*f)
	for i := range n {
		for j := range f {
			rows[i*f+j] = float32(float64(s.Mean[j]) + float64(s.Std[j])*rng.NormFloat64())
		}
	}
	return rows
}

// sanityRows is how many rows CheckArtifactSanity scores.
const numRows = 256

// CheckArtifactSanity is CheckSanity on SanityRows of the artifact's own
// schema.
func CheckArtifact(a *quant.Artifact) error {
	return Check(a, Rows(a.Schema(), numRows))
}

// CheckSanity scores raw feature rows (k rows of the artifact's feature
// count, flat) with the artifact — the int8 scorer for an int8 artifact,
// the float network for a float32 one — and refuses (ErrInsane) a model
// with a score that is not a finite float32 or whose scores are all
// equal, and an int8 model whose output layer could score any row beyond
// float32 (checkScoreRange).
func Check(a *quant.Artifact, rows []float32) error {
	F := a.Header.Layers.F
	if F <= 0 || len(rows) == 0 || len(rows)%F != 0 {
		return fmt.Errorf("%w: %d calibration values are not rows of %d features", ErrInsane, len(rows), F)
	}
	k := len(rows) / F
	scores := make([]float64, k)
	switch a.Header.DType {
	case quant.Int8:
		n, err := int8net.New(a)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInsane, err)
		}
		if err := checkScoreRange(a); err != nil {
			return err
		}
		out := make([]float32, k)
		if err := n.Scorer().Scores(rows, k, out); err != nil {
			return fmt.Errorf("%w: %v", ErrInsane, err)
		}
		for i, v := range out {
			scores[i] = float64(v)
		}
	case quant.Float32:
		m, err := a.Float()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInsane, err)
		}
		if scores, err = quant.ReferenceScores(m, rows, k); err != nil {
			return fmt.Errorf("%w: %v", ErrInsane, err)
		}
	default:
		return fmt.Errorf("%w: dtype %q", ErrInsane, a.Header.DType)
	}
	return checkScores(scores, a.Header.Version)
}

// checkScoreRange refuses an int8 artifact some candidate row, not
// necessarily a calibration row, could score beyond float32: a score is
// (b3 + a2·w3) times the output scale, with activations a2 of at most
// quant.MaxActivation (the factor 2 absorbs float32 rounding).
func checkScoreRange(a *quant.Artifact) error {
	acc := math.Abs(float64(a.Tensor("b3").I32[0]))
	for _, v := range a.Tensor("w3").I8 {
		acc += quant.MaxActivation * math.Abs(float64(v))
	}
	if bound := acc * float64(a.Tensor("w3_scale").F32[0]); !(bound <= math.MaxFloat32/2) {
		return fmt.Errorf("%w: version %d can score a row up to %v (not a finite float32)", ErrInsane, a.Header.Version, bound)
	}
	return nil
}

// checkScores is the rule: every score a finite float32, not all equal.
func checkScores(scores []float64, version uint64) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > math.MaxFloat32 {
			return fmt.Errorf("%w: version %d scores calibration row %d as %v (not a finite float32)", ErrInsane, version, i, s)
		}
		lo, hi = math.Min(lo, s), math.Max(hi, s)
	}
	if len(scores) > 1 && lo == hi {
		return fmt.Errorf("%w: version %d gives all %d calibration rows the same score %v: it cannot tell nodes apart", ErrInsane, version, len(scores), lo)
	}
	return nil
}
