// Package sanity is the model check every loader runs before it uses a
// model (docs/security.md, "Model sanity"): a model can be validly
// signed, verify and quantize and still be useless — scales of 1e30 make
// every input quantize to zero (every node ties), scales near the float32
// maximum make scores infinite. Its raw scores on a calibration set must
// all be finite and must not all be equal. The coordinator checks before
// it stores a new model, agents and the scheduler plugin before they swap
// one in.
//
// The functions hold no state and are safe for concurrent use.
package sanity
