package onnx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx/onnxpb"
)

// ImportOptions choose how Import fills what a file does not carry. Start
// from DefaultImportOptions.
type ImportOptions struct {
	// SchemaID names the feature schema of a file without edgesched
	// metadata (one made outside the project): the operator's statement
	// that its input columns are this build's features, in order. It must
	// be policy.SchemaID. Empty: such files are refused. A file with
	// metadata must agree with it when both are set.
	SchemaID string
	// CriticHidden is the hidden width of the critic given to a file
	// without one (the scheduler never runs the critic; federated
	// training starts from it). 0 is invalid.
	CriticHidden int
	// Seed seeds that critic's initialisation.
	Seed uint64
}

// DefaultImportOptions: no schema assertion, a critic of 32 (the shipped
// models' width) seeded with 1.
func DefaultImportOptions() ImportOptions { return ImportOptions{CriticHidden: 32, Seed: 1} }

// Validate checks the options.
func (o ImportOptions) Validate() error {
	if o.SchemaID != "" && o.SchemaID != policy.SchemaID {
		return fmt.Errorf("%w: schema %q, this build computes %q", ErrUnsupported, o.SchemaID, policy.SchemaID)
	}
	if o.CriticHidden < 1 || o.CriticHidden > maxWidth {
		return fmt.Errorf("onnx import: critic hidden width %d, want 1 to %d", o.CriticHidden, maxWidth)
	}
	return nil
}

// Imported is a model read from an ONNX graph, with how it was read.
type Imported struct {
	Model *nn.Model
	// Layout describes the scorer's layers as found, e.g.
	// "Gemm(transB=1)+Relu, Gemm(transB=1)+Relu, Gemm(transB=1)".
	Layout string
	// Normalized: the graph normalises its input (Sub, Div); otherwise the
	// model's schema has identity statistics.
	Normalized bool
	// Critic: the critic was read from the graph; otherwise it was
	// initialised with ImportOptions.Seed.
	Critic bool
	// Metadata: the file carries edgesched's metadata (schema, decision
	// rule); otherwise ImportOptions.SchemaID named the schema.
	Metadata bool
	// Dated: the file carries edgesched.created (Model.Created is its
	// value); otherwise Model.Created is zero.
	Dated bool
	// Producer is the file's producer name and version.
	Producer string
}

// Import reads the policy network out of a decoded ONNX model (Decode).
// The supported family is edgesched's scorer, F -> H1 -> H2 -> 1 with Relu
// or Tanh after each hidden layer (nn.Net.Act; a Tanh network runs in
// the float path only: the int8 path refuses it), each layer written as Gemm (transB 0 or 1) or
// MatMul+Add, weights as initializers, Constant nodes or their Transpose;
// optionally preceded by (x - mean) / std and followed by a Squeeze, and
// optionally with the critic as a second output (Export's layout). The
// input must be N x F float32 with F the schema's width, and the file's
// metadata (or opt.SchemaID) must name this build's schema. Everything
// else is refused with an error wrapping ErrUnsupported that names the
// operator, node or shape.
func Import(mp *onnxpb.ModelProto, opt ImportOptions) (*Imported, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opset, err := defaultOpset(mp)
	if err != nil {
		return nil, err
	}
	g := mp.GetGraph()
	if g == nil {
		return nil, fmt.Errorf("%w: no graph", ErrFormat)
	}
	meta, err := metadata(mp)
	if err != nil {
		return nil, err
	}
	ip := &interp{opset: opset, vals: map[string]any{}}
	for _, t := range g.Initializer {
		if _, dup := ip.vals[t.GetName()]; dup || t.GetName() == "" {
			return nil, fmt.Errorf("%w: initializer %q defined twice or unnamed", ErrUnsupported, t.GetName())
		}
		v, err := decodeTensor(t)
		if err != nil {
			return nil, fmt.Errorf("%w: initializer: %v", ErrUnsupported, err)
		}
		ip.vals[t.GetName()] = v
	}
	F := policy.NumFeatures
	var inputName string
	for _, in := range g.Input {
		if _, isInit := ip.vals[in.GetName()]; isInit {
			continue // IR < 4 lists initializers as inputs too
		}
		if inputName != "" {
			return nil, fmt.Errorf("%w: inputs %q and %q: the policy takes one, the feature rows", ErrUnsupported, inputName, in.GetName())
		}
		inputName = in.GetName()
		if err := checkInput(in, F); err != nil {
			return nil, err
		}
		ip.vals[inputName] = &chain{width: F}
	}
	if inputName == "" {
		return nil, fmt.Errorf("%w: the graph has no input", ErrUnsupported)
	}
	for _, n := range g.Node {
		if err := ip.run(n); err != nil {
			return nil, err
		}
	}
	var actor, critic *chain
	for _, o := range g.Output {
		v, ok := ip.vals[o.GetName()]
		c, isChain := v.(*chain)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: output %q is not computed by any node", ErrUnsupported, o.GetName())
		case !isChain:
			return nil, fmt.Errorf("%w: output %q is a constant", ErrUnsupported, o.GetName())
		case c.pooled == nil && c.pool == "" && actor == nil:
			actor = c
		case c.pooled != nil && critic == nil:
			critic = c
		default:
			return nil, fmt.Errorf("%w: output %q: the policy has one score output and at most one critic output", ErrUnsupported, o.GetName())
		}
	}
	if actor == nil {
		return nil, fmt.Errorf("%w: no score output (N x 1, computed from the input by the MLP)", ErrUnsupported)
	}
	if err := checkLayers("scorer", actor.layers, F, 2, "relu", "tanh"); err != nil {
		return nil, err
	}
	l := actor.layers
	H1, H2 := l[0].out, l[1].out
	hc := opt.CriticHidden
	if critic != nil {
		if critic.squeezed {
			return nil, fmt.Errorf("%w: the critic's output is squeezed", ErrUnsupported)
		}
		src := critic.pooled
		if len(src.layers) != 2 || src.layers[0] != l[0] || src.layers[1] != l[1] {
			return nil, fmt.Errorf("%w: the critic pools something other than the scorer's last hidden layer", ErrUnsupported)
		}
		if err := checkLayers("critic", critic.layers, 2*H2, 1, "relu"); err != nil {
			return nil, err
		}
		hc = critic.layers[0].out
	}
	net, err := nn.NewNet(F, H1, H2, hc, rand.New(rand.NewPCG(opt.Seed, 0x0770)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	for i := range net.Act {
		if l[i].act == "tanh" {
			net.Act[i] = nn.Tanh
		}
	}
	ps := params(net)
	setLayer(ps["w1"], ps["b1"], l[0])
	setLayer(ps["w2"], ps["b2"], l[1])
	setLayer(ps["w3"], ps["b3"], l[2])
	if critic != nil {
		setLayer(ps["wc1"], ps["bc1"], critic.layers[0])
		setLayer(ps["wc2"], ps["bc2"], critic.layers[1])
	}
	schema := policy.NewSchema()
	if actor.mean != nil {
		copy(schema.Mean, actor.mean)
	}
	if actor.std != nil {
		copy(schema.Std, actor.std)
	}
	if actor.lo != nil || actor.hi != nil { // a side without a bound, or with an infinite one, is unbounded
		schema.Lo, schema.Hi = make([]float32, F), make([]float32, F)
		for i := range F {
			schema.Lo[i], schema.Hi[i] = -math.MaxFloat32, math.MaxFloat32
			if actor.lo != nil {
				schema.Lo[i] = max(actor.lo[i], -math.MaxFloat32)
			}
			if actor.hi != nil {
				schema.Hi[i] = min(actor.hi[i], math.MaxFloat32)
			}
		}
	}
	if err := meta.checkSchema(schema, opt); err != nil {
		return nil, err
	}
	m := &nn.Model{Schema: schema, Net: net, Meta: meta.meta, Decision: meta.decision, Created: meta.created, Sage: meta.sage}
	if meta.meta == nil {
		m.Meta = map[string]any{"imported_from": "onnx", "onnx_producer": producer(mp)}
		if critic == nil {
			m.Meta["critic_seed"] = float64(opt.Seed)
		}
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	var how []string
	for _, x := range l {
		how = append(how, x.how)
	}
	return &Imported{
		Model: m, Layout: strings.Join(how, ", "), Normalized: actor.mean != nil || actor.std != nil,
		Critic: critic != nil, Metadata: meta.schemaID != "", Dated: meta.dated, Producer: producer(mp),
	}, nil
}

func producer(mp *onnxpb.ModelProto) string {
	p := strings.TrimSpace(mp.GetProducerName() + " " + mp.GetProducerVersion())
	if p == "" {
		return "unknown"
	}
	return p
}

// checkInput requires a float tensor of shape [N, F].
func checkInput(in *onnxpb.ValueInfoProto, F int) error {
	tt := in.GetType().GetTensorType()
	if tt == nil {
		return fmt.Errorf("%w: input %q is not a tensor", ErrUnsupported, in.GetName())
	}
	if et := onnxpb.TensorProto_DataType(tt.GetElemType()); et != onnxpb.TensorProto_FLOAT {
		return fmt.Errorf("%w: input %q is %s, want FLOAT", ErrUnsupported, in.GetName(), et)
	}
	dims := tt.GetShape().GetDim()
	if len(dims) != 2 {
		return fmt.Errorf("%w: input %q has rank %d, want N x %d feature rows", ErrUnsupported, in.GetName(), len(dims), F)
	}
	if _, ok := dims[1].GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue); !ok {
		return fmt.Errorf("%w: input %q has no fixed width, want %d features", ErrUnsupported, in.GetName(), F)
	}
	if w := dims[1].GetDimValue(); w != int64(F) {
		return fmt.Errorf("%w: input %q is %d features wide, the feature schema %s has %d", ErrUnsupported, in.GetName(), w, policy.SchemaID, F)
	}
	return nil
}

// checkLayers requires hidden layers with one of the activations acts and
// a linear output of width 1.
func checkLayers(what string, ls []*layer, in, hidden int, acts ...string) error {
	if len(ls) != hidden+1 {
		var shape []string
		for _, l := range ls {
			shape = append(shape, fmt.Sprint(l.in))
		}
		if len(ls) > 0 {
			shape = append(shape, fmt.Sprint(ls[len(ls)-1].out))
		}
		return fmt.Errorf("%w: the %s has %d linear layers (%s); edgesched's network has %d hidden layers and an output of 1", ErrUnsupported, what, len(ls), strings.Join(shape, " -> "), hidden)
	}
	for i, l := range ls {
		switch {
		case i < hidden && l.act == "":
			return fmt.Errorf("%w: the %s's layer %d (%s) has no activation after it", ErrUnsupported, what, i+1, l.how)
		case i < hidden && !slices.Contains(acts, l.act):
			return fmt.Errorf("%w: the %s's layer %d (%s): want %s", ErrUnsupported, what, i+1, l.how, strings.Join(acts, " or "))
		case i == hidden && l.act != "":
			return fmt.Errorf("%w: the %s's output layer (%s) has an activation; the score must be linear", ErrUnsupported, what, l.how)
		case i == hidden && l.out != 1:
			return fmt.Errorf("%w: the %s's output has width %d, want 1", ErrUnsupported, what, l.out)
		}
	}
	if ls[0].in != in {
		return fmt.Errorf("%w: the %s takes %d inputs, want %d", ErrUnsupported, what, ls[0].in, in)
	}
	return nil
}

// setLayer copies a layer's weights (in x out, as Net stores them) and
// bias (zero when the graph has none).
func setLayer(w, b nn.Param, l *layer) {
	copy(w.Values(), l.w)
	bv := b.Values()
	if l.b == nil {
		clear(bv)
		return
	}
	copy(bv, l.b)
}

// fileMeta is the edgesched metadata of a file.
type fileMeta struct {
	schemaID, schemaHash string
	names                []string
	decision             policy.Decision
	meta                 map[string]any
	created              time.Time
	dated                bool
	sage                 *policy.SageWeights
}

func metadata(mp *onnxpb.ModelProto) (*fileMeta, error) {
	fm := &fileMeta{}
	seen := map[string]bool{}
	for _, e := range mp.MetadataProps {
		k, v := e.GetKey(), e.GetValue()
		if seen[k] {
			return nil, fmt.Errorf("%w: metadata key %q given twice", ErrUnsupported, k)
		}
		seen[k] = true
		var err error
		switch k {
		case MetaSchemaID:
			fm.schemaID = v
		case MetaSchemaHash:
			fm.schemaHash = v
		case MetaFeatureNames:
			err = strictJSON(v, &fm.names)
		case MetaDecision:
			if err = strictJSON(v, &fm.decision); err == nil {
				err = fm.decision.Validate()
			}
		case MetaMeta:
			err = strictJSON(v, &fm.meta)
		case MetaCreated:
			fm.created, err = time.Parse(time.RFC3339Nano, v)
			fm.dated = err == nil
		case MetaSage:
			fm.sage, err = policy.DecodeSage([]byte(v))
		default:
			if strings.HasPrefix(k, "edgesched.") {
				err = fmt.Errorf("unknown key (a newer edgesched?)")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: metadata %s: %v", ErrUnsupported, k, err)
		}
	}
	if fm.schemaID == "" && (fm.names != nil || fm.schemaHash != "") {
		return nil, fmt.Errorf("%w: metadata has feature names or a schema hash but no %s", ErrUnsupported, MetaSchemaID)
	}
	return fm, nil
}

func strictJSON(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// checkSchema matches the file's schema (metadata, or the operator's
// SchemaID) with this build's.
func (fm *fileMeta) checkSchema(s policy.Schema, opt ImportOptions) error {
	switch {
	case fm.schemaID == "" && opt.SchemaID == "":
		return fmt.Errorf("%w: the file names no feature schema (no %s metadata): check that its %d input columns are the features of %s in order (docs/policy.md), then name that schema (--schema-id %s)",
			ErrUnsupported, MetaSchemaID, policy.NumFeatures, policy.SchemaID, policy.SchemaID)
	case fm.schemaID != "" && fm.schemaID != policy.SchemaID:
		return fmt.Errorf("%w: the file's feature schema is %q, this build computes %q", ErrUnsupported, fm.schemaID, policy.SchemaID)
	case fm.schemaID != "" && opt.SchemaID != "" && fm.schemaID != opt.SchemaID:
		return fmt.Errorf("%w: the file's feature schema is %q, the options say %q", ErrUnsupported, fm.schemaID, opt.SchemaID)
	}
	if fm.names != nil && !slices.Equal(fm.names, s.Names) {
		for i := range max(len(fm.names), len(s.Names)) {
			if i >= len(fm.names) || i >= len(s.Names) || fm.names[i] != s.Names[i] {
				got, want := "(none)", "(none)"
				if i < len(fm.names) {
					got = fm.names[i]
				}
				if i < len(s.Names) {
					want = s.Names[i]
				}
				return fmt.Errorf("%w: feature %d is %s in the file, %s in schema %s", ErrUnsupported, i, got, want, policy.SchemaID)
			}
		}
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if fm.schemaHash != "" && fm.schemaHash != s.Hash() {
		return fmt.Errorf("%w: the graph's normalisation does not match the schema hash in the metadata (edited statistics?)", ErrUnsupported)
	}
	return nil
}
