package bounds

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant/esu"
)

// Check checks a verified update's payload against round r of dims
// parameters: shape, finite values, its base model, the norm bound and the
// sample cap. It returns a refusal reason and its detail, or "" when the
// update passes. A payload refused for its shape against another size is
// checked again against dims.
func Check(r *store.Round, dims int, cu *federated.CheckedUpdate) (reason, detail string) {
	h := &cu.Msg.Header
	if errors.Is(cu.PayloadErr, esu.ErrShape) && dims > 0 {
		// checked against another round's size (the round changed
		// since): check again
		cu.CheckPayload(dims)
	}
	switch err := cu.PayloadErr; {
	case errors.Is(err, esu.ErrNonFinite):
		return federated.ReasonNonFinite, err.Error()
	case errors.Is(err, esu.ErrShape):
		return federated.ReasonShape, err.Error()
	case err != nil:
		return federated.ReasonMalformed, err.Error()
	case cu.Payload.Values != dims:
		return federated.ReasonShape, fmt.Sprintf("%d values, the model has %d", cu.Payload.Values, dims)
	case cu.Payload.Base != h.BaseModel:
		return federated.ReasonBaseModel, "payload and header name different base models"
	case r.MaxNorm > 0 && !(cu.Payload.Norm <= r.MaxNorm):
		return federated.ReasonTooLarge, fmt.Sprintf("L2 norm %.4g exceeds the round's bound %.4g", cu.Payload.Norm, r.MaxNorm)
	case r.MaxSamples > 0 && h.Samples > r.MaxSamples:
		return federated.ReasonTooHeavy, fmt.Sprintf("claims %d samples, the round's cap is %d", h.Samples, r.MaxSamples)
	}
	return "", ""
}

// PrepareTerm prepares an update that passed Check for summing
// round r's sums: its term (weight times clipping factor times values),
// its effective and sample weights and its staleness; a refusal reason
// and detail when it does not fit the sums' bounds.
func PrepareTerm(sum *federated.FixedSum, r *store.Round, dims int, cu *federated.CheckedUpdate) (term federated.FixedTerm, eff, samples float64, staleness int, reason, detail string) {
	view := cu.View // (the payload was checked against dims)
	if view == nil || view.Len() != dims {
		return term, 0, 0, 0, federated.ReasonShape, fmt.Sprintf("%d values, the model has %d", cu.Payload.Values, dims)
	}
	eff, samples, staleness = Weights(r, &cu.Msg.Header)
	term, err := sum.Prepare(view, eff*clipFactor(r, cu.Payload.Norm), cu.Payload.Norm)
	if err != nil {
		return term, 0, 0, 0, federated.ReasonTooLarge, err.Error()
	}
	return term, eff, samples, staleness, "", ""
}

// TermNorm is the L2 norm of the term an update of L2 norm norm adds to
// round r's sums: its effective weight times its norm clipped to the
// round's clip norm (what PrepareTerm's multiplier makes of it).
func TermNorm(r *store.Round, h *federated.UpdateHeader, norm float64) float64 {
	eff, _, _ := Weights(r, h)
	return eff * clipFactor(r, norm) * norm
}

// clipFactor scales an update of L2 norm norm down to round r's clip norm.
func clipFactor(r *store.Round, norm float64) float64 {
	if r.ClipNorm > 0 && norm > r.ClipNorm {
		return r.ClipNorm / norm
	}
	return 1
}

// Weights are an update's weights in summing round r: the effective
// one (FedBuff's staleness discount applied), the sample weight, and its
// staleness.
func Weights(r *store.Round, h *federated.UpdateHeader) (eff, samples float64, staleness int) {
	samples = float64(h.Samples)
	if r.Sum.UnitWeight {
		samples = 1 // the DP noise is calibrated for an unweighted mean of clipped deltas
	}
	staleness = max(0, int(r.BaseVersion)-int(h.BaseVersion))
	eff = samples
	if r.Sum.Rule == federated.RuleFedBuff {
		eff *= math.Pow(1+float64(staleness), -r.Sum.Exponent)
	}
	return eff, samples, staleness
}
