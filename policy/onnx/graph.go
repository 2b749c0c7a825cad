package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// The graph is read by a small abstract interpreter: constants (initializers,
// Constant nodes and Transpose/Identity of them) are tensors; everything
// computed from the graph input is a chain, the layers applied to it so
// far. Each supported operator extends a chain in the one way the policy's
// MLP family allows, or the node is refused with its operator and shapes.

// tensor is a constant: float32 (f) or int64 (i) values, row-major.
type tensor struct {
	name string
	dims []int64
	f    []float32
	i    []int64
}

func (t *tensor) isFloat() bool { return t.i == nil }

// layer is one affine layer, y = act(x W + b).
type layer struct {
	in, out int
	w       []float32 // in x out, row-major (Net's layout)
	b       []float32 // nil: no bias yet (a layer without Add has none)
	act     string    // "", "relu" or "tanh"
	how     string    // the operators it came from, for the report
}

// chain is a value computed from the graph input.
type chain struct {
	lo, hi    []float32 // the input bounds (Max, Min) before the normalisation
	mean, std []float32 // the normalisation before the first layer
	layers    []*layer
	width     int
	// critic chains: the actor chain whose rows they pool
	pooled *chain
	// a ReduceMean / ReduceMax over the rows awaiting its Concat
	pool    string
	poolSrc *chain
	// a final Squeeze of the N x 1 output
	squeezed bool
}

func (c *chain) clone() *chain {
	d := *c
	d.layers = slices.Clone(c.layers)
	return &d
}

// last returns the chain's last layer, or nil.
func (c *chain) last() *layer {
	if len(c.layers) == 0 {
		return nil
	}
	return c.layers[len(c.layers)-1]
}

type interp struct {
	opset  int64
	vals   map[string]any // *tensor or *chain
	inputF int
}

func nodeName(n *onnxpb.NodeProto) string {
	if n.GetName() != "" {
		return fmt.Sprintf("%s (node %q)", n.GetOpType(), n.GetName())
	}
	return fmt.Sprintf("%s (node writing %q)", n.GetOpType(), strings.Join(n.Output, ", "))
}

func (ip *interp) refuse(n *onnxpb.NodeProto, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnsupported, nodeName(n), fmt.Sprintf(format, args...))
}

// supportedOps lists what the importer reads (docs/quant.md).
const supportedOps = "Gemm, MatMul, Add (a layer's bias), Relu and Tanh, Max and Min (the input's bounds), Sub and Div (normalisation), Transpose, Identity and Constant (of weights), ReduceMean, ReduceMax and Concat (the critic's pooling), Squeeze (of the N x 1 score)"

// run interprets one node.
func (ip *interp) run(n *onnxpb.NodeProto) error {
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		return ip.refuse(n, "operator of domain %q: only the default ONNX domain is supported", d)
	}
	if n.Overload != nil && n.GetOverload() != "" {
		return ip.refuse(n, "overloaded (model-local function) operator")
	}
	if len(n.Output) != 1 || n.Output[0] == "" {
		return ip.refuse(n, "%d outputs, want 1", len(n.Output))
	}
	out := n.Output[0]
	if _, dup := ip.vals[out]; dup {
		return ip.refuse(n, "writes %q, which is already defined", out)
	}
	var in []any
	for _, name := range n.Input {
		if name == "" {
			in = append(in, nil) // an omitted optional input
			continue
		}
		v, ok := ip.vals[name]
		if !ok {
			return ip.refuse(n, "reads %q, which nothing before it defines", name)
		}
		in = append(in, v)
	}
	v, err := ip.eval(n, in)
	if err != nil {
		return err
	}
	ip.vals[out] = v
	return nil
}

func (ip *interp) eval(n *onnxpb.NodeProto, in []any) (any, error) {
	op := n.GetOpType()
	switch op {
	case "Identity":
		if err := ip.attrs(n, nil); err != nil {
			return nil, err
		}
		if err := ip.arity(n, in, 1, 1); err != nil {
			return nil, err
		}
		return in[0], nil
	case "Constant":
		return ip.constant(n)
	case "Transpose":
		return ip.transpose(n, in)
	case "Sub", "Div":
		return ip.normalize(n, in)
	case "Max", "Min":
		return ip.bound(n, in)
	case "MatMul":
		if err := ip.attrs(n, nil); err != nil {
			return nil, err
		}
		if err := ip.arity(n, in, 2, 2); err != nil {
			return nil, err
		}
		c, w, err := ip.chainAndWeight(n, in[0], in[1])
		if err != nil {
			return nil, err
		}
		return ip.affine(n, c, w, nil, false, "MatMul")
	case "Gemm":
		return ip.gemm(n, in)
	case "Add":
		return ip.add(n, in)
	case "Relu", "Tanh":
		if err := ip.attrs(n, nil); err != nil {
			return nil, err
		}
		if err := ip.arity(n, in, 1, 1); err != nil {
			return nil, err
		}
		c, ok := in[0].(*chain)
		if !ok {
			return nil, ip.refuse(n, "of a constant")
		}
		l := c.last()
		if l == nil || l.act != "" || c.pool != "" || c.squeezed {
			return nil, ip.refuse(n, "not right after a linear layer (Gemm, or MatMul with its Add)")
		}
		d := c.clone()
		nl := *l
		nl.act, nl.how = strings.ToLower(op), l.how+"+"+op
		d.layers[len(d.layers)-1] = &nl
		return d, nil
	case "ReduceMean", "ReduceMax":
		return ip.reduce(n, in)
	case "Concat":
		return ip.concat(n, in)
	case "Squeeze":
		return ip.squeeze(n, in)
	case "Sigmoid", "LeakyRelu", "Elu", "Selu", "Gelu", "Softplus", "HardSigmoid", "HardSwish", "Mish", "PRelu", "Celu", "ThresholdedRelu":
		return nil, ip.refuse(n, "activation %s is not supported: the importer reads Relu and Tanh hidden layers (and only ReLU networks quantize to int8)", op)
	}
	return nil, ip.refuse(n, "unsupported operator; the importer reads %s", supportedOps)
}

func (ip *interp) arity(n *onnxpb.NodeProto, in []any, lo, hi int) error {
	if len(in) < lo || len(in) > hi {
		return ip.refuse(n, "%d inputs, want %d to %d", len(in), lo, hi)
	}
	for i := range lo {
		if in[i] == nil {
			return ip.refuse(n, "input %d is missing", i)
		}
	}
	return nil
}

// attrs refuses attributes outside allowed (name to type) and attributes
// that refer to a parent function's.
func (ip *interp) attrs(n *onnxpb.NodeProto, allowed map[string]onnxpb.AttributeProto_AttributeType) error {
	seen := map[string]bool{}
	for _, a := range n.Attribute {
		t, ok := allowed[a.GetName()]
		if !ok {
			return ip.refuse(n, "attribute %q is not supported", a.GetName())
		}
		if seen[a.GetName()] {
			return ip.refuse(n, "attribute %q given twice", a.GetName())
		}
		seen[a.GetName()] = true
		if a.GetRefAttrName() != "" {
			return ip.refuse(n, "attribute %q refers to a function's attribute", a.GetName())
		}
		if a.GetType() != t {
			return ip.refuse(n, "attribute %q is of type %s, want %s", a.GetName(), a.GetType(), t)
		}
	}
	return nil
}

func attr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.Attribute {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

func (ip *interp) constant(n *onnxpb.NodeProto) (any, error) {
	if err := ip.attrs(n, map[string]onnxpb.AttributeProto_AttributeType{
		"value": onnxpb.AttributeProto_TENSOR, "value_float": onnxpb.AttributeProto_FLOAT,
		"value_floats": onnxpb.AttributeProto_FLOATS, "value_int": onnxpb.AttributeProto_INT, "value_ints": onnxpb.AttributeProto_INTS,
	}); err != nil {
		return nil, err
	}
	if len(n.Input) != 0 || len(n.Attribute) != 1 {
		return nil, ip.refuse(n, "want no inputs and exactly one value attribute")
	}
	a := n.Attribute[0]
	switch a.GetName() {
	case "value":
		t, err := decodeTensor(a.GetT())
		if err != nil {
			return nil, ip.refuse(n, "%v", err)
		}
		return t, nil
	case "value_float":
		return &tensor{f: []float32{a.GetF()}}, nil
	case "value_floats":
		if len(a.Floats) > MaxElements {
			return nil, ip.refuse(n, "%d values", len(a.Floats))
		}
		return &tensor{dims: []int64{int64(len(a.Floats))}, f: slices.Clone(a.Floats)}, nil
	case "value_int":
		return &tensor{i: []int64{a.GetI()}}, nil
	default: // value_ints
		return &tensor{dims: []int64{int64(len(a.Ints))}, i: append([]int64{}, a.Ints...)}, nil
	}
}

func (ip *interp) transpose(n *onnxpb.NodeProto, in []any) (any, error) {
	if err := ip.attrs(n, map[string]onnxpb.AttributeProto_AttributeType{"perm": onnxpb.AttributeProto_INTS}); err != nil {
		return nil, err
	}
	if err := ip.arity(n, in, 1, 1); err != nil {
		return nil, err
	}
	t, ok := in[0].(*tensor)
	if !ok {
		return nil, ip.refuse(n, "of the activations: only weights may be transposed")
	}
	if len(t.dims) != 2 || !t.isFloat() {
		return nil, ip.refuse(n, "of a %v tensor: only float matrices may be transposed", t.dims)
	}
	if a := attr(n, "perm"); a != nil && !slices.Equal(a.Ints, []int64{1, 0}) {
		return nil, ip.refuse(n, "perm %v of a matrix", a.Ints)
	}
	r, c := int(t.dims[0]), int(t.dims[1])
	return &tensor{name: t.name, dims: []int64{t.dims[1], t.dims[0]}, f: transpose(t.f, r, c)}, nil
}

// vector returns t's values when t is a float vector of width w, shaped
// [w] or [1, w].
func vector(t *tensor, w int) ([]float32, bool) {
	if !t.isFloat() || len(t.f) != w {
		return nil, false
	}
	switch {
	case len(t.dims) == 1, len(t.dims) == 2 && t.dims[0] == 1:
		return t.f, true
	}
	return nil, false
}

func (ip *interp) normalize(n *onnxpb.NodeProto, in []any) (any, error) {
	c, v, err := ip.rowsAndVector(n, in, map[bool]string{true: "the feature rows minus a constant vector", false: "the feature rows divided by a constant vector"}[n.GetOpType() == "Sub"],
		func(c *chain) bool { return len(c.layers) > 0 || c.pooled != nil || c.pool != "" },
		"after a layer: only the input's normalisation, (x - mean) / std, is supported")
	if err != nil {
		return nil, err
	}
	d := c.clone()
	switch {
	case n.GetOpType() == "Sub" && c.mean == nil && c.std == nil:
		d.mean = v
	case n.GetOpType() == "Div" && c.std == nil:
		d.std = v
	default:
		return nil, ip.refuse(n, "a second normalisation step: only (x - mean) / std is supported")
	}
	return d, nil
}

// bound reads the input's bounds: Max of the raw rows and a constant
// vector (the lower bounds), Min of them and another (the upper), before
// the normalisation (policy.Schema.Lo, Hi).
func (ip *interp) bound(n *onnxpb.NodeProto, in []any) (any, error) {
	c, v, err := ip.rowsAndVector(n, in, "the feature rows and a constant vector of bounds",
		func(c *chain) bool {
			return len(c.layers) > 0 || c.pooled != nil || c.pool != "" || c.mean != nil || c.std != nil
		},
		"after the normalisation or a layer: only bounds on the raw input are supported")
	if err != nil {
		return nil, err
	}
	d := c.clone()
	switch {
	case n.GetOpType() == "Max" && c.lo == nil:
		d.lo = v
	case n.GetOpType() == "Min" && c.hi == nil:
		d.hi = v
	default:
		return nil, ip.refuse(n, "a second %s: only one lower and one upper bound per input are supported", n.GetOpType())
	}
	return d, nil
}

// rowsAndVector reads the two operands of an elementwise step on the
// input rows (normalisation, bounds): the rows, refused where late says
// the step comes too late (lateWhy), and a constant vector of their
// width (want names the pair).
func (ip *interp) rowsAndVector(n *onnxpb.NodeProto, in []any, want string, late func(*chain) bool, lateWhy string) (*chain, []float32, error) {
	if err := ip.attrs(n, nil); err != nil {
		return nil, nil, err
	}
	if err := ip.arity(n, in, 2, 2); err != nil {
		return nil, nil, err
	}
	c, ok := in[0].(*chain)
	t, ok2 := in[1].(*tensor)
	if !ok || !ok2 {
		return nil, nil, ip.refuse(n, "want %s", want)
	}
	if late(c) {
		return nil, nil, ip.refuse(n, "%s", lateWhy)
	}
	v, ok := vector(t, c.width)
	if !ok {
		return nil, nil, ip.refuse(n, "operand %q of shape %v, want [%d] or [1, %d]", t.name, t.dims, c.width, c.width)
	}
	return c, v, nil
}

// chainAndWeight splits a layer's operands: the activations first, a
// constant matrix second.
func (ip *interp) chainAndWeight(n *onnxpb.NodeProto, a, b any) (*chain, *tensor, error) {
	c, ok := a.(*chain)
	w, ok2 := b.(*tensor)
	if !ok || !ok2 {
		return nil, nil, ip.refuse(n, "want activations times a constant weight matrix")
	}
	if len(w.dims) != 2 || !w.isFloat() {
		return nil, nil, ip.refuse(n, "weight %q of shape %v, want a float matrix", w.name, w.dims)
	}
	return c, w, nil
}

// affine appends the layer x W (+ bias) to c; w is in x out unless
// transposed (out x in, PyTorch's layout with Gemm transB=1).
func (ip *interp) affine(n *onnxpb.NodeProto, c *chain, w *tensor, bias *tensor, transposed bool, how string) (any, error) {
	if c.pool != "" || c.squeezed {
		return nil, ip.refuse(n, "of a pooled or squeezed value")
	}
	if l := c.last(); l != nil && l.act == "" {
		return nil, ip.refuse(n, "two linear layers without an activation between them")
	}
	if c.pooled == nil && len(c.layers) == 0 && (c.mean != nil) != (c.std != nil) {
		// Sub without Div or Div without Sub: the other is the identity.
		c = c.clone()
		if c.mean == nil {
			c.mean = make([]float32, c.width)
		}
		if c.std == nil {
			c.std = ones(c.width)
		}
	}
	in, out := int(w.dims[0]), int(w.dims[1])
	wv := w.f
	if transposed {
		in, out = out, in
		wv = transpose(w.f, out, in)
	}
	if in != c.width {
		return nil, ip.refuse(n, "weight %q of shape %v takes %d inputs, the values have %d", w.name, w.dims, in, c.width)
	}
	if out < 1 || out > maxWidth {
		return nil, ip.refuse(n, "layer of %d outputs (1 to %d supported)", out, maxWidth)
	}
	l := &layer{in: in, out: out, w: wv, how: how}
	if bias != nil {
		b, ok := vector(bias, out)
		if !ok {
			return nil, ip.refuse(n, "bias %q of shape %v, want [%d] or [1, %d]", bias.name, bias.dims, out, out)
		}
		l.b = b
	}
	d := c.clone()
	d.layers = append(d.layers, l)
	d.width = out
	return d, nil
}

// maxWidth is the widest hidden layer a policy network may have.
const maxWidth = 4096

func (ip *interp) gemm(n *onnxpb.NodeProto, in []any) (any, error) {
	if err := ip.attrs(n, map[string]onnxpb.AttributeProto_AttributeType{
		"alpha": onnxpb.AttributeProto_FLOAT, "beta": onnxpb.AttributeProto_FLOAT,
		"transA": onnxpb.AttributeProto_INT, "transB": onnxpb.AttributeProto_INT,
	}); err != nil {
		return nil, err
	}
	if err := ip.arity(n, in, 2, 3); err != nil {
		return nil, err
	}
	for _, name := range []string{"alpha", "beta"} {
		if a := attr(n, name); a != nil && a.GetF() != 1 {
			return nil, ip.refuse(n, "%s = %v: only 1 is supported (fold it into the weights)", name, a.GetF())
		}
	}
	if a := attr(n, "transA"); a != nil && a.GetI() != 0 {
		return nil, ip.refuse(n, "transA = %d: the activations must not be transposed", a.GetI())
	}
	transB := false
	if a := attr(n, "transB"); a != nil {
		if a.GetI() != 0 && a.GetI() != 1 {
			return nil, ip.refuse(n, "transB = %d", a.GetI())
		}
		transB = a.GetI() == 1
	}
	c, w, err := ip.chainAndWeight(n, in[0], in[1])
	if err != nil {
		return nil, err
	}
	var bias *tensor
	if len(in) == 3 && in[2] != nil {
		b, ok := in[2].(*tensor)
		if !ok {
			return nil, ip.refuse(n, "bias computed from the activations")
		}
		bias = b
	}
	how := "Gemm"
	if transB {
		how = "Gemm(transB=1)"
	}
	return ip.affine(n, c, w, bias, transB, how)
}

func (ip *interp) add(n *onnxpb.NodeProto, in []any) (any, error) {
	if err := ip.attrs(n, nil); err != nil {
		return nil, err
	}
	if err := ip.arity(n, in, 2, 2); err != nil {
		return nil, err
	}
	c, ok := in[0].(*chain)
	t, ok2 := in[1].(*tensor)
	if !ok || !ok2 {
		c, ok = in[1].(*chain)
		t, ok2 = in[0].(*tensor)
	}
	if !ok || !ok2 {
		return nil, ip.refuse(n, "want activations plus a constant bias")
	}
	l := c.last()
	if l == nil || l.b != nil || l.act != "" || c.pool != "" || c.squeezed {
		return nil, ip.refuse(n, "not a bias right after a MatMul")
	}
	b, ok := vector(t, l.out)
	if !ok {
		return nil, ip.refuse(n, "bias %q of shape %v, want [%d] or [1, %d]", t.name, t.dims, l.out, l.out)
	}
	d := c.clone()
	nl := *l
	nl.b, nl.how = b, l.how+"+Add"
	d.layers[len(d.layers)-1] = &nl
	return d, nil
}

// axesNode checks a one-input node with axes (allowed are its other
// attributes) and returns the axes.
func (ip *interp) axesNode(n *onnxpb.NodeProto, in []any, inputFrom int64, allowed map[string]onnxpb.AttributeProto_AttributeType) ([]int64, error) {
	if ip.opset < inputFrom {
		allowed["axes"] = onnxpb.AttributeProto_INTS
	}
	if err := ip.attrs(n, allowed); err != nil {
		return nil, err
	}
	if err := ip.arity(n, in, 1, 2); err != nil {
		return nil, err
	}
	return ip.axesOf(n, in, inputFrom)
}

// axesOf returns a node's axes: from the attribute (older opsets) or the
// second input (ReduceX from opset 18, Squeeze from 13).
func (ip *interp) axesOf(n *onnxpb.NodeProto, in []any, inputFrom int64) ([]int64, error) {
	if ip.opset >= inputFrom {
		if attr(n, "axes") != nil {
			return nil, ip.refuse(n, "axes as an attribute in opset %d (an input since opset %d)", ip.opset, inputFrom)
		}
		if len(in) < 2 || in[1] == nil {
			return nil, nil
		}
		t, ok := in[1].(*tensor)
		if !ok || t.isFloat() {
			return nil, ip.refuse(n, "axes must be a constant int64 tensor")
		}
		return t.i, nil
	}
	if len(in) > 1 {
		return nil, ip.refuse(n, "axes as an input in opset %d (an attribute before opset %d)", ip.opset, inputFrom)
	}
	if a := attr(n, "axes"); a != nil {
		return a.Ints, nil
	}
	return nil, nil
}

func (ip *interp) reduce(n *onnxpb.NodeProto, in []any) (any, error) {
	allowed := map[string]onnxpb.AttributeProto_AttributeType{"keepdims": onnxpb.AttributeProto_INT}
	if ip.opset >= 18 {
		allowed["noop_with_empty_axes"] = onnxpb.AttributeProto_INT
	}
	axes, err := ip.axesNode(n, in, 18, allowed)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(axes, []int64{0}) && !slices.Equal(axes, []int64{-2}) {
		return nil, ip.refuse(n, "over axes %v: only the critic's pooling over the rows (axis 0) is supported", axes)
	}
	if a := attr(n, "keepdims"); a != nil && a.GetI() != 1 {
		return nil, ip.refuse(n, "keepdims = %d, want 1", a.GetI())
	}
	c, ok := in[0].(*chain)
	if !ok || c.pooled != nil || c.pool != "" || c.squeezed || c.last() == nil || c.last().act == "" {
		return nil, ip.refuse(n, "not of the scorer's hidden activations")
	}
	kind := map[string]string{"ReduceMean": "mean", "ReduceMax": "max"}[n.GetOpType()]
	return &chain{width: c.width, pool: kind, poolSrc: c}, nil
}

func (ip *interp) concat(n *onnxpb.NodeProto, in []any) (any, error) {
	if err := ip.attrs(n, map[string]onnxpb.AttributeProto_AttributeType{"axis": onnxpb.AttributeProto_INT}); err != nil {
		return nil, err
	}
	if err := ip.arity(n, in, 2, 2); err != nil {
		return nil, err
	}
	if a := attr(n, "axis"); a == nil || (a.GetI() != 1 && a.GetI() != -1) {
		return nil, ip.refuse(n, "want axis 1")
	}
	m, ok := in[0].(*chain)
	x, ok2 := in[1].(*chain)
	if !ok || !ok2 || m.pool != "mean" || x.pool != "max" || m.poolSrc != x.poolSrc {
		return nil, ip.refuse(n, "only the critic's pooling, [mean, max] of the same hidden activations, is supported")
	}
	return &chain{width: 2 * m.width, pooled: m.poolSrc}, nil
}

func (ip *interp) squeeze(n *onnxpb.NodeProto, in []any) (any, error) {
	axes, err := ip.axesNode(n, in, 13, map[string]onnxpb.AttributeProto_AttributeType{})
	if err != nil {
		return nil, err
	}
	c, ok := in[0].(*chain)
	if !ok || c.width != 1 || c.pool != "" || c.squeezed || c.last() == nil || c.last().act != "" {
		return nil, ip.refuse(n, "only the final N x 1 score may be squeezed")
	}
	if !slices.Equal(axes, []int64{1}) && !slices.Equal(axes, []int64{-1}) {
		return nil, ip.refuse(n, "over axes %v, want [1]", axes)
	}
	d := c.clone()
	d.squeezed = true
	return d, nil
}

func ones(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// decodeTensor reads a constant: float32 or int64, inline data only,
// element count within MaxElements (checked before anything is
// allocated).
func decodeTensor(t *onnxpb.TensorProto) (*tensor, error) {
	if t == nil {
		return nil, fmt.Errorf("missing tensor")
	}
	name := t.GetName()
	// external_data and segment are refused by the reader (unmodeled)
	if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return nil, fmt.Errorf("tensor %q: external data is not supported (save the model with its weights inside)", name)
	}
	if len(t.Dims) > 4 {
		return nil, fmt.Errorf("tensor %q of rank %d", name, len(t.Dims))
	}
	count := int64(1)
	for _, d := range t.Dims {
		if d < 0 || d > MaxElements || count*d > MaxElements {
			return nil, fmt.Errorf("tensor %q of shape %v: more than %d elements", name, t.Dims, MaxElements)
		}
		count *= d
	}
	out := &tensor{name: name, dims: slices.Clone(t.Dims)}
	switch dt := onnxpb.TensorProto_DataType(t.GetDataType()); dt {
	case onnxpb.TensorProto_FLOAT:
		switch {
		case t.RawData != nil && len(t.FloatData) > 0:
			return nil, fmt.Errorf("tensor %q has both raw_data and float_data", name)
		case t.RawData != nil:
			if int64(len(t.RawData)) != 4*count {
				return nil, fmt.Errorf("tensor %q of shape %v has %d bytes of raw_data, want %d", name, t.Dims, len(t.RawData), 4*count)
			}
			out.f = make([]float32, count)
			for i := range out.f {
				out.f[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.RawData[4*i:]))
			}
		default:
			if int64(len(t.FloatData)) != count {
				return nil, fmt.Errorf("tensor %q of shape %v has %d values, want %d", name, t.Dims, len(t.FloatData), count)
			}
			out.f = slices.Clone(t.FloatData)
			if out.f == nil {
				out.f = []float32{}
			}
		}
		for i, v := range out.f {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("tensor %q[%d] is %v", name, i, v)
			}
		}
	case onnxpb.TensorProto_INT64:
		switch {
		case t.RawData != nil && len(t.Int64Data) > 0:
			return nil, fmt.Errorf("tensor %q has both raw_data and int64_data", name)
		case t.RawData != nil:
			if int64(len(t.RawData)) != 8*count {
				return nil, fmt.Errorf("tensor %q of shape %v has %d bytes of raw_data, want %d", name, t.Dims, len(t.RawData), 8*count)
			}
			out.i = make([]int64, count)
			for i := range out.i {
				out.i[i] = int64(binary.LittleEndian.Uint64(t.RawData[8*i:]))
			}
		default:
			if int64(len(t.Int64Data)) != count {
				return nil, fmt.Errorf("tensor %q of shape %v has %d values, want %d", name, t.Dims, len(t.Int64Data), count)
			}
			out.i = append([]int64{}, t.Int64Data...)
		}
	default:
		return nil, fmt.Errorf("tensor %q of type %s: only float (and int64 axes) are supported", name, dt)
	}
	return out, nil
}
