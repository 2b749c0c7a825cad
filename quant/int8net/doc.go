// Package int8net runs int8 model artifacts: the all-integer scorer (Net,
// built by New from a quant.Artifact) behind the policy.Scorer the
// scheduler plugin and the simulator score with (Net.Scorer), its kernels
// (the portable SIMD-within-a-register one in every build, AVX2 and
// AVX-512 ones with GOEXPERIMENT=simd on amd64: Kernel, Kernels,
// Net.ScorerWith; all compute the same scores bit for bit), and the int8
// policy in the simulator (Factory; how often it agrees with the float
// policy is quant/agreement's).
//
// The seam with quant: quant makes and checks artifacts, int8net runs
// them. What both sides must compute alike, the integer arithmetic an
// int8 artifact's scales stand for, is quant's, since Quantize needs it
// too (adaptive rounding fits on the inputs QuantizeInput gives, and
// Quantize refuses an artifact whose layers have no int32 multipliers):
// quant.QuantizeInput (with quant.RoundMagic, which the vector kernels
// round with), quant.MaxInput and quant.MaxActivation, and
// quant.Artifact.Requantization, whose input quantization and
// multipliers New takes as they are and whose refusals it returns.
// Everything that only running needs is int8net's: requantizing an
// accumulator (requant), the packed and vector weight layouts, the
// kernels and the scorer's scratch. int8net imports quant; quant never
// imports int8net.
//
// Concurrency and lifetimes: a Net is read-only once built and safe to
// share; it keeps the artifact's weight and bias tensors without copying
// them, so the artifact must not change after New. A Scorer (Net.Scorer,
// Net.ScorerWith) holds scratch and belongs to one goroutine (one
// simulator run or one scheduling cycle at a time); Factory gives each
// policy it makes a Scorer of its own. Kernel and Kernels only read what
// the CPU has.
package int8net
