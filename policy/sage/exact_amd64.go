//go:build amd64 && !amd64.v3

package sage

// pretrainExact: pretraining here computes the shipped file's bits (no
// fused multiply-adds below GOAMD64=v3).
const pretrainExact = true
