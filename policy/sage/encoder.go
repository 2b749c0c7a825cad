package sage

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy/nn"
)

// ErrConfig reports invalid encoder or training settings.
var ErrConfig = errors.New("sage: invalid configuration")

// Config shapes an encoder. Start from DefaultConfig.
type Config struct {
	// Hidden units of the first of two layers (ignored with one layer).
	Hidden int
	// Dim is the embedding width.
	Dim int
	// Layers is 1 or 2: how many hops of neighbourhood an embedding sees.
	Layers int
	// Fanouts are the neighbours sampled per service at each layer, first
	// layer first (len Layers). A service with fewer keeps them all.
	Fanouts []int
	// Seed draws the neighbour samples at inference (Embed); a fixed seed
	// makes every program that embeds the same graph agree.
	Seed uint64
}

// DefaultConfig is two layers of 32 hidden units, 16-wide embeddings, 25
// then 10 sampled neighbours (the GraphSAGE paper's fan-outs), seed 1.
// Widths and depth were chosen by link-prediction AUC with one training
// app left out (docs/policy.md, "GraphSAGE").
func DefaultConfig() Config {
	return Config{Hidden: 32, Dim: 16, Layers: 2, Fanouts: []int{25, 10}, Seed: 1}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Layers < 1 || c.Layers > nn.MaxSageLayers:
		return fmt.Errorf("%w: %d layers, want 1..%d", ErrConfig, c.Layers, nn.MaxSageLayers)
	case len(c.Fanouts) != c.Layers:
		return fmt.Errorf("%w: %d fan-outs for %d layers", ErrConfig, len(c.Fanouts), c.Layers)
	case c.Dim < 1 || c.Dim > nn.MaxSageWidth:
		return fmt.Errorf("%w: embedding width %d, want 1..%d", ErrConfig, c.Dim, nn.MaxSageWidth)
	case c.Layers == 2 && (c.Hidden < 1 || c.Hidden > nn.MaxSageWidth):
		return fmt.Errorf("%w: %d hidden units, want 1..%d", ErrConfig, c.Hidden, nn.MaxSageWidth)
	}
	for k, f := range c.Fanouts {
		if f < 1 || f > MaxFanout {
			return fmt.Errorf("%w: layer %d fan-out %d, want 1..%d", ErrConfig, k+1, f, MaxFanout)
		}
	}
	return nil
}

// Encoder is a GraphSAGE network with the neighbourhood sampling it runs
// on.
type Encoder struct {
	Net     *nn.Sage
	Fanouts []int
	Seed    uint64
}

// New returns an encoder shaped by cfg with weights drawn from rng.
func New(cfg Config, rng *rand.Rand) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	net, err := nn.NewSage(NumInputs, cfg.Hidden, cfg.Dim, cfg.Layers, rng)
	if err != nil {
		return nil, err
	}
	return &Encoder{Net: net, Fanouts: append([]int(nil), cfg.Fanouts...), Seed: cfg.Seed}, nil
}

// Clone returns an independent copy.
func (e *Encoder) Clone() *Encoder {
	return &Encoder{Net: e.Net.Clone(), Fanouts: append([]int(nil), e.Fanouts...), Seed: e.Seed}
}

// Embeddings are a graph's service embeddings.
type Embeddings struct {
	Names []string
	Dim   int
	// Values holds len(Names) rows of Dim values, each of unit length
	// (zero for a service whose network output is zero).
	Values []float32
}

// Of returns the named service's embedding, or nil.
func (m *Embeddings) Of(name string) []float32 {
	for i, n := range m.Names {
		if n == name {
			return m.Values[i*m.Dim : (i+1)*m.Dim]
		}
	}
	return nil
}

// Embed computes the embeddings of g's services. It runs a private copy
// of the network, so concurrent calls on one Encoder are safe (the
// network's 1,712 parameters cost nothing to copy next to the pass).
func (e *Encoder) Embed(g *Graph) (*Embeddings, error) {
	c, err := compile(g)
	if err != nil {
		return nil, err
	}
	return e.embed(c, e.Seed)
}

func (e *Encoder) embed(c *compiled, seed uint64) (*Embeddings, error) {
	if len(e.Fanouts) != e.Net.Layers {
		return nil, fmt.Errorf("%w: %d fan-outs for %d layers", ErrConfig, len(e.Fanouts), e.Net.Layers)
	}
	n := len(c.g.Services)
	if e.Net.F != NumInputs {
		return nil, fmt.Errorf("%w: a network of %d inputs, want %d", ErrConfig, e.Net.F, NumInputs)
	}
	v, err := e.Net.Clone().Forward(c.inputs(), n, c.aggregators(e.Fanouts, seed))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	out := &Embeddings{Dim: e.Net.D, Values: append([]float32(nil), v...), Names: make([]string, n)}
	for i, s := range c.g.Services {
		out.Names[i] = s.Name
	}
	return out, nil
}
