package sage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/edgesched/edgesched/policy/nn"
)

// PretrainConfig sets up link-prediction pre-training: the embeddings of
// two services that call each other should score high (their dot product
// times Scale, through a sigmoid), those of a service and one it does not
// call, drawn at random, low (the unsupervised loss of the GraphSAGE
// paper, with call edges as the positive pairs). Start from
// DefaultPretrainConfig.
type PretrainConfig struct {
	Encoder Config
	// Epochs over the training graphs (one Adam step per graph).
	Epochs int
	// LR is Adam's learning rate.
	LR float64
	// Negatives drawn per call edge.
	Negatives int
	// Scale multiplies a pair's score before the sigmoid.
	Scale float64
	// Bilinear scores a pair of embeddings a, b by a^T S b with S the
	// symmetric part of a trained matrix that starts as the identity;
	// false scores them by their dot product (in [-1, 1]). A dot product
	// cannot score a hub and its leaves above two leaves alike in
	// everything (their embeddings are equal).
	Bilinear bool
	// FrozenEncoder trains the decoder alone on the encoder's random
	// initial weights (the ablation of training the encoder; needs
	// Bilinear).
	FrozenEncoder bool
	// Seed draws the initial weights, the order of the graphs and the
	// negative pairs; each epoch's neighbour samples come from the
	// encoder's seed (Encoder.Seed) and the epoch. Callers log it.
	Seed uint64
}

// DefaultPretrainConfig is DefaultConfig's encoder, 1,000 epochs at
// learning rate 0.01, 5 negatives per edge, scale 5, a bilinear score,
// seed 1.
func DefaultPretrainConfig() PretrainConfig {
	return PretrainConfig{Encoder: DefaultConfig(), Epochs: 1000, LR: 0.01, Negatives: 5, Scale: 5, Bilinear: true, Seed: 1}
}

// Decoder scores a pair of embeddings for link prediction: a^T S b with
// S the symmetric part of M (D x D, row-major), or the dot product when M
// is nil.
type Decoder struct {
	D int
	M []float32
	// Scale multiplies a score before the sigmoid (Probability):
	// PretrainConfig.Scale.
	Scale float64
}

// newDecoder is the identity bilinear decoder (a dot product to start
// from), or the dot product itself.
func newDecoder(d int, bilinear bool) *Decoder {
	dec := &Decoder{D: d}
	if bilinear {
		dec.M = make([]float32, d*d)
		for i := range d {
			dec.M[i*d+i] = 1
		}
	}
	return dec
}

// apply writes S b into out (len D).
func (dec *Decoder) apply(out, b []float32) {
	d := dec.D
	if dec.M == nil {
		copy(out, b)
		return
	}
	for i := range d {
		var s float32
		for j := range d {
			s += (dec.M[i*d+j] + dec.M[j*d+i]) / 2 * b[j]
		}
		out[i] = s
	}
}

// Score is a^T S b.
func (dec *Decoder) Score(a, b []float32) float64 {
	sb := make([]float32, dec.D)
	dec.apply(sb, b)
	var s float64
	for j := range a {
		s += float64(a[j]) * float64(sb[j])
	}
	return s
}

// Pretrained is a pre-trained encoder and the decoder it was trained
// with.
type Pretrained struct {
	Encoder *Encoder
	Decoder *Decoder
}

// Validate checks the configuration.
func (c *PretrainConfig) Validate() error {
	if err := c.Encoder.Validate(); err != nil {
		return err
	}
	switch {
	case c.Epochs < 1 || c.Epochs > 1_000_000:
		return fmt.Errorf("%w: %d epochs, want 1..1000000", ErrConfig, c.Epochs)
	case !(c.LR > 0 && c.LR <= 1):
		return fmt.Errorf("%w: learning rate %v, want (0, 1]", ErrConfig, c.LR)
	case c.Negatives < 1 || c.Negatives > 100:
		return fmt.Errorf("%w: %d negatives per edge, want 1..100", ErrConfig, c.Negatives)
	case !(c.Scale > 0 && c.Scale <= 100):
		return fmt.Errorf("%w: scale %v, want (0, 100]", ErrConfig, c.Scale)
	case c.FrozenEncoder && !c.Bilinear:
		return fmt.Errorf("%w: a frozen encoder with a dot product leaves nothing to train", ErrConfig)
	}
	return nil
}

// EpochStat is one epoch's mean loss over the training graphs.
type EpochStat struct {
	Epoch int
	Loss  float64
}

// trainGraph is a compiled training graph with its call pairs.
type trainGraph struct {
	c     *compiled
	pairs [][2]int32 // u < v
	adj   map[[2]int32]bool
}

func newTrainGraph(c *compiled) trainGraph {
	t := trainGraph{c: c, adj: map[[2]int32]bool{}}
	for u, nb := range c.nbr {
		for _, e := range nb {
			t.adj[[2]int32{int32(u), e.idx}] = true
			if int32(u) < e.idx {
				t.pairs = append(t.pairs, [2]int32{int32(u), e.idx})
			}
		}
	}
	slices.SortFunc(t.pairs, func(a, b [2]int32) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return t
}

// negative draws a service neither u nor one of its neighbours (false
// after a few tries: u is linked to nearly everything).
func (t *trainGraph) negative(rng *rand.Rand, u int32) (int32, bool) {
	n := len(t.c.g.Services)
	for range 16 {
		w := int32(rng.IntN(n))
		if w != u && !t.adj[[2]int32{u, w}] {
			return w, true
		}
	}
	return 0, false
}

// Pretrain trains an encoder and its decoder on link prediction over
// graphs (each with at least one call between two services). progress,
// when set, gets every epoch's loss. Cancelling ctx stops between steps
// with ctx's error.
func Pretrain(ctx context.Context, graphs []*Graph, cfg PretrainConfig, progress func(EpochStat)) (*Pretrained, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tgs, err := compileTraining(graphs)
	if err != nil {
		return nil, err
	}
	rng := initRand(cfg)
	enc, err := New(cfg.Encoder, rng)
	if err != nil {
		return nil, err
	}
	dec := newDecoder(cfg.Encoder.Dim, cfg.Bilinear)
	dec.Scale = cfg.Scale
	if err := fit(ctx, tgs, cfg, enc, dec, rng, progress); err != nil {
		return nil, err
	}
	return &Pretrained{Encoder: enc, Decoder: dec}, nil
}

// compileTraining compiles the training graphs; each must have a call
// between two services.
func compileTraining(graphs []*Graph) ([]trainGraph, error) {
	if len(graphs) == 0 {
		return nil, fmt.Errorf("%w: no training graphs", ErrConfig)
	}
	tgs := make([]trainGraph, len(graphs))
	for i, g := range graphs {
		c, err := compile(g)
		if err != nil {
			return nil, fmt.Errorf("training graph %d: %w", i, err)
		}
		tgs[i] = newTrainGraph(c)
		if len(tgs[i].pairs) == 0 {
			return nil, fmt.Errorf("%w: training graph %d has no call between two services", ErrGraph, i)
		}
	}
	return tgs, nil
}

// fit trains enc and dec in place on tgs for cfg.Epochs epochs (one Adam
// step per graph), drawing the order and the negatives from rng.
func fit(ctx context.Context, tgs []trainGraph, cfg PretrainConfig, enc *Encoder, dec *Decoder, rng *rand.Rand, progress func(EpochStat)) error {
	grads := enc.Net.Clone()
	dM := make([]float32, len(dec.M))
	params := [][]float32{dec.M}
	gs := [][]float32{dM}
	for i, p := range enc.Net.Params() {
		if !cfg.FrozenEncoder {
			params, gs = append(params, p.Values()), append(gs, grads.Params()[i].Values())
		}
	}
	opt := newAdam(params)
	order := make([]int, len(tgs))
	for i := range order {
		order[i] = i
	}
	for ep := range cfg.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sum float64
		for _, gi := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			grads.Zero()
			clear(dM)
			loss, err := linkStep(enc, dec, &tgs[gi], cfg, uint64(ep)+1, rng, grads, dM)
			if err != nil {
				return err
			}
			sum += loss
			opt.apply(params, gs, cfg.LR)
		}
		if progress != nil {
			progress(EpochStat{Epoch: ep + 1, Loss: sum / float64(len(tgs))})
		}
	}
	return nil
}

// FineTune continues the link-prediction training of p on graphs (a
// site's observed call graph) with cfg's epochs, learning rate,
// negatives and seed; the encoder's shape, the decoder's kind and the
// scale stay p's (cfg's are ignored). p is not changed: the result is a
// trained copy. It is how a site trains the GraphSAGE weights a model
// carries in a federated round (agent/site's TwinTrainer).
func FineTune(ctx context.Context, p *Pretrained, graphs []*Graph, cfg PretrainConfig, progress func(EpochStat)) (*Pretrained, error) {
	if p == nil || p.Decoder == nil {
		return nil, fmt.Errorf("%w: fine-tuning needs an encoder with its decoder", ErrConfig)
	}
	cfg.Encoder = Config{Hidden: p.Encoder.Net.H, Dim: p.Encoder.Net.D, Layers: p.Encoder.Net.Layers, Fanouts: p.Encoder.Fanouts, Seed: p.Encoder.Seed}
	cfg.Bilinear, cfg.Scale, cfg.FrozenEncoder = p.Decoder.M != nil, p.Decoder.Scale, false
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tgs, err := compileTraining(graphs)
	if err != nil {
		return nil, err
	}
	enc := p.Encoder.Clone()
	dec := &Decoder{D: p.Decoder.D, M: append([]float32(nil), p.Decoder.M...), Scale: p.Decoder.Scale}
	if err := fit(ctx, tgs, cfg, enc, dec, initRand(cfg), progress); err != nil {
		return nil, err
	}
	return &Pretrained{Encoder: enc, Decoder: dec}, nil
}

// initRand is the generator Pretrain draws its initial weights from
// first (then its samples and negatives).
func initRand(cfg PretrainConfig) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, 0x5a9e)) }

// Untrained is the encoder Pretrain starts from with cfg: its random
// initial weights (the ablation of pre-training).
func Untrained(cfg PretrainConfig) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return New(cfg.Encoder, initRand(cfg))
}

// linkStep embeds t with the epoch's samples and adds the gradient of its
// link loss to grads (the encoder's) and dM (the decoder's); it returns
// the loss.
func linkStep(enc *Encoder, dec *Decoder, t *trainGraph, cfg PretrainConfig, epoch uint64, rng *rand.Rand, grads *nn.Sage, dM []float32) (float64, error) {
	c := t.c
	n, d := len(c.g.Services), enc.Net.D
	emb, err := enc.Net.Forward(c.inputs(), n, c.aggregators(enc.Fanouts, enc.Seed^epoch*0x9e3779b97f4a7c15))
	if err != nil {
		return 0, err
	}
	dEmb := make([]float32, n*d)
	norm := 1 / float64(len(t.pairs))
	var loss float64
	// pull one pair together (positive) or push it apart
	su, sv := make([]float32, d), make([]float32, d)
	pair := func(u, v int32, positive bool) {
		eu, ev := emb[int(u)*d:int(u+1)*d], emb[int(v)*d:int(v+1)*d]
		dec.apply(su, eu)
		dec.apply(sv, ev)
		var dot float64
		for j := range eu {
			dot += float64(eu[j]) * float64(sv[j])
		}
		z := cfg.Scale * dot
		var g float64
		if positive {
			loss += norm * softplus(-z)
			g = -cfg.Scale * sigmoid(-z) * norm
		} else {
			loss += norm * softplus(z)
			g = cfg.Scale * sigmoid(z) * norm
		}
		du, dv := dEmb[int(u)*d:int(u+1)*d], dEmb[int(v)*d:int(v+1)*d]
		for j := range eu {
			du[j] += float32(g) * sv[j]
			dv[j] += float32(g) * su[j]
		}
		if dec.M != nil {
			h := float32(g) / 2
			for i := range d {
				for j := range d {
					dM[i*d+j] += h * (eu[i]*ev[j] + ev[i]*eu[j])
				}
			}
		}
	}
	for _, p := range t.pairs {
		pair(p[0], p[1], true)
		for q := range cfg.Negatives {
			u := p[q%2] // alternate the end the negative is drawn for
			if w, ok := t.negative(rng, u); ok {
				pair(u, w, false)
			}
		}
	}
	enc.Net.Backward(dEmb, grads)
	return loss, nil
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// softplus is log(1 + e^z), without overflow.
func softplus(z float64) float64 {
	if z > 30 {
		return z
	}
	return math.Log1p(math.Exp(z))
}

// adam is the Adam optimiser over a list of parameter slices.
type adam struct {
	m, v [][]float32
	step int
}

func newAdam(params [][]float32) *adam {
	a := &adam{}
	for _, p := range params {
		a.m, a.v = append(a.m, make([]float32, len(p))), append(a.v, make([]float32, len(p)))
	}
	return a
}

// apply steps params (in place) against grads at learning rate lr.
func (a *adam) apply(params, grads [][]float32, lr float64) {
	const b1, b2, eps = 0.9, 0.999, 1e-8
	a.step++
	c1, c2 := 1-math.Pow(b1, float64(a.step)), 1-math.Pow(b2, float64(a.step))
	for i, p := range params {
		g, m, v := grads[i], a.m[i], a.v[i]
		for j := range p {
			gj := float64(g[j])
			mj := b1*float64(m[j]) + (1-b1)*gj
			vj := b2*float64(v[j]) + (1-b2)*gj*gj
			m[j], v[j] = float32(mj), float32(vj)
			p[j] -= float32(lr * (mj / c1) / (math.Sqrt(vj/c2) + eps))
		}
	}
}

// maxAUCNegatives bounds the non-call pairs LinkAUC scores.
const maxAUCNegatives = 200_000

// LinkAUC measures how well e's embeddings, scored by dec (nil: the dot
// product), tell g's calls from pairs of services that do not call each
// other: the probability that a call pair's score exceeds a non-call
// pair's (ties count half), over
// every call pair and every non-call pair (or maxAUCNegatives of them
// drawn with a fixed seed on large graphs). 0.5 is chance.
func LinkAUC(e *Encoder, dec *Decoder, g *Graph) (float64, error) {
	c, err := compile(g)
	if err != nil {
		return 0, err
	}
	t := newTrainGraph(c)
	n := len(g.Services)
	if len(t.pairs) == 0 || len(t.pairs) == n*(n-1)/2 {
		return 0, fmt.Errorf("%w: link prediction needs call pairs and non-call pairs", ErrGraph)
	}
	m, err := e.embed(c, e.Seed)
	if err != nil {
		return 0, err
	}
	d := m.Dim
	if dec == nil {
		dec = newDecoder(d, false)
	} else if dec.D != d || (dec.M != nil && len(dec.M) != d*d) {
		return 0, fmt.Errorf("%w: a decoder of width %d for embeddings of %d", ErrConfig, dec.D, d)
	}
	dot := func(u, v int32) float64 {
		return dec.Score(m.Values[int(u)*d:int(u+1)*d], m.Values[int(v)*d:int(v+1)*d])
	}
	type scored struct {
		s   float64
		pos bool
	}
	var all []scored
	for _, p := range t.pairs {
		all = append(all, scored{dot(p[0], p[1]), true})
	}
	if nonCalls := n*(n-1)/2 - len(t.pairs); nonCalls <= maxAUCNegatives {
		for u := range int32(n) {
			for v := u + 1; v < int32(n); v++ {
				if !t.adj[[2]int32{u, v}] {
					all = append(all, scored{dot(u, v), false})
				}
			}
		}
	} else {
		rng := rand.New(rand.NewPCG(uint64(n), 0xa0c))
		for len(all) < len(t.pairs)+maxAUCNegatives {
			u := int32(rng.IntN(n))
			if w, ok := t.negative(rng, u); ok {
				all = append(all, scored{dot(u, w), false})
			}
		}
	}
	for _, a := range all {
		if math.IsNaN(a.s) || math.IsInf(a.s, 0) {
			return 0, fmt.Errorf("%w: a pair scores %v (a decoder or weights that are not finite)", ErrConfig, a.s)
		}
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(a.s, b.s) })
	// Mann-Whitney: average ranks over ties
	var rankSum float64
	pos := float64(len(t.pairs))
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].s == all[i].s {
			j++
		}
		rank := float64(i+j+1) / 2 // ranks i+1..j averaged
		for k := i; k < j; k++ {
			if all[k].pos {
				rankSum += rank
			}
		}
		i = j
	}
	neg := float64(len(all)) - pos
	return (rankSum - pos*(pos+1)/2) / (pos * neg), nil
}
