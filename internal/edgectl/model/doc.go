// Package model holds edgectl model and its verbs, and edgectl bench.
// Offline: keygen, sign, quantize, inspect, verify, export (ONNX) and
// import (ONNX) work with model files and signed artifacts (.esm, .esa);
// bench measures how fast this machine scores candidate nodes with a
// model. With a running coordinator (package adminclient): list, show,
// promote and rollback work on its model registry.
//
// Each constructor returns a new command with its own flags. quantize
// and bench run the simulator and honour the command's context.
package model
