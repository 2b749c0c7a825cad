package policy

import "errors"

// ErrShape reports parameters or inputs of the wrong shape.
var ErrShape = errors.New("policy: wrong shape")

// Layers are a network's sizes (package policy/nn's Net; the int8 network
// of package quant has the same layout).
type Layers struct {
	F  int `json:"features"`
	H1 int `json:"hidden1"`
	H2 int `json:"hidden2"`
	HC int `json:"critic_hidden"`
}

// Shapes returns the expected shape of each parameter, in the order of
// policy/nn's Net.Params and of the artifacts' tensors.
func Shapes(f, h1, h2, hc int) [][]int {
	return [][]int{{f, h1}, {h1}, {h1, h2}, {h2}, {h2, 1}, {1}, {2 * h2, hc}, {hc}, {hc, 1}, {1}}
}
