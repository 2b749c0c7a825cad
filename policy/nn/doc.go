// Package nn is the trainable float policy network: the actor-critic MLP
// on gorgonia.org/tensor (Net; under the nogorgonia build tag a small
// gonum-backed tensor with bit-identical results, tensor_gonum.go), the
// float model (Model: schema, network, decision rule, provenance), its
// file format (.esm: Encode, Decode, ReadFile, WriteFile) and the float
// scorer and simulator policy (FloatScorer, NewLearned, Factory).
// Training (policy/ppo), quantization (quant) and ONNX (policy/onnx) build
// on it; the feature schema, extraction and decision rule are package
// policy's.
//
// Builds: FloatScorer sums the pod features' share of the first layer
// once per call; under GOEXPERIMENT=simd on amd64 with AVX2 it runs a
// 32 -> 32 ReLU network's other layers in an AVX2 kernel
// (kernel_simd.go; kernel_generic.go elsewhere). Every build gives the
// same bits as Net.Scores on normalised rows (FloatScorer's doc).
//
// Concurrency and lifetimes: a Net keeps the activations of its last
// Forward for Backward and is not safe for concurrent use; Clone gives an
// independent copy. A Model is read-only once built and may be shared;
// NewLearned and NewFloatScorer copy the network, so every run gets its
// own. A FloatScorer, like a Net, belongs to one goroutine.
package nn
