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

// FloatModel is a float model as plain data: what package quant reads of
// one (policy/nn's Model.Float makes it), so quant, and the scheduler
// that links quant, do not link the trainable float network.
type FloatModel struct {
	Schema Schema
	Layers Layers
	// Params are the network's parameters in Shapes order (actor, then
	// critic), row-major; they share the model's storage: do not modify.
	Params [][]float32
	// Act names the scorer's two hidden activations ("relu", "tanh").
	Act [2]string
	// Decision is the model's decision rule.
	Decision Decision
	// Sage are the GraphSAGE weights the model carries (its dep_affinity
	// reads partners of their ID), nil for none; artifacts sign them with
	// the model.
	Sage *SageWeights
	// NewScorer returns an independent scorer over the float network
	// (quant runs it in the simulator to calibrate and to compare); nil
	// where no float network is at hand.
	NewScorer func() (Scorer, error)
}

// AllReLU reports whether both hidden layers are ReLU (the int8 path's
// requirement).
func (f *FloatModel) AllReLU() bool { return f.Act == [2]string{"relu", "relu"} }
