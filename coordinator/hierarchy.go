package coordinator

import (
	"errors"
	"fmt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// The checks and the fixed-point term of an update, shared by the root's
// ingest (accept, addToSums) and regional aggregators (package
// coordinator/region), so that a region verifies and sums its sites'
// updates exactly as the root would (docs/federated.md "Hierarchical
// rounds").

// CheckBounds checks a verified update's payload against round r of dims
// parameters: shape, finite values, its base model, the norm bound and the
// sample cap. It returns a refusal reason and its detail, or "" when the
// update passes. A payload refused for its shape against another size is
// checked again against dims.
func CheckBounds(r *Round, dims int, cu *federated.CheckedUpdate) (reason, detail string) {
	h := &cu.Msg.Header
	if errors.Is(cu.PayloadErr, quant.ErrShape) && dims > 0 {
		// checked against another round's size (the round changed
		// since): check again
		cu.CheckPayload(dims)
	}
	switch err := cu.PayloadErr; {
	case errors.Is(err, quant.ErrNonFinite):
		return federated.ReasonNonFinite, err.Error()
	case errors.Is(err, quant.ErrShape):
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

// PrepareTerm prepares an update that passed CheckBounds for summing
// round r's sums: its term (weight times clipping factor times values),
// its effective and sample weights and its staleness; a refusal reason
// and detail when it does not fit the sums' bounds.
func PrepareTerm(sum *federated.FixedSum, r *Round, dims int, cu *federated.CheckedUpdate) (term federated.FixedTerm, eff, samples float64, staleness int, reason, detail string) {
	view := cu.View // (the payload was checked against dims)
	if view == nil || view.Len() != dims {
		return term, 0, 0, 0, federated.ReasonShape, fmt.Sprintf("%d values, the model has %d", cu.Payload.Values, dims)
	}
	eff, samples, staleness = sumWeights(r, &cu.Msg.Header)
	term, err := sum.Prepare(view, eff*clipFactor(r, cu.Payload.Norm), cu.Payload.Norm)
	if err != nil {
		return term, 0, 0, 0, federated.ReasonTooLarge, err.Error()
	}
	return term, eff, samples, staleness, "", ""
}

// clipFactor scales an update of L2 norm norm down to round r's clip norm.
func clipFactor(r *Round, norm float64) float64 {
	if r.ClipNorm > 0 && norm > r.ClipNorm {
		return r.ClipNorm / norm
	}
	return 1
}

// SumWeights are an update's weights in summing round r (sumWeights).
func SumWeights(r *Round, h *federated.UpdateHeader) (eff, samples float64, staleness int) {
	return sumWeights(r, h)
}
