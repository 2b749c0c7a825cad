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
// Concurrency and lifetimes: a Net keeps the activations of its last
// Forward for Backward and is not safe for concurrent use; Clone gives an
// independent copy. A Model is read-only once built and may be shared;
// NewLearned and NewFloatScorer copy the network, so every run gets its
// own.
package nn
