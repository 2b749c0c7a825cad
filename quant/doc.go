// Package quant will hold the int8 side of the policy: per-channel
// quantisation of weights, calibrated int8 activations, pure-Go integer
// inference kernels that score a pod's candidate nodes in one batch, the
// signed model artifact format (header, payload, ed25519 signature) and the
// int8 codec for federated weight updates.
//
// Nothing is implemented yet; see the project's open issues.
package quant
