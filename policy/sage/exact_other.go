//go:build !amd64 || amd64.v3

package sage

// pretrainExact: pretraining here may end a few bits away from the
// shipped file (the compiler may fuse multiply-adds).
const pretrainExact = false
