package openb

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/edgesched/edgesched/sim"
)

// ErrMix wraps every refusal of a mixture reference or configuration.
var ErrMix = errors.New("openb: bad mixture")

// MixPrefix starts a mixture reference, accepted wherever a pod list is
// ("mix:spec=0.3,seed=7"): a workload generated from an openb pod list by
// Generate.
const MixPrefix = "mix:"

// Mix describes a workload drawn from a base openb pod list with other
// proportions of pod kinds, the way the FGD paper derived its traces from
// the default one (cpu050, gpushare40, multigpu20, gpuspec10 change one
// share each). Every pod is a copy of a base pod of its kind; only the GPU
// models a pod names are new. A negative share keeps the base's own.
type Mix struct {
	// Base is the pod list pods are copied from (a reference LoadPods
	// takes, not a mixture); "" means openb:default.
	Base string
	// Pods is the number of pods; 0 means as many as the base has.
	Pods int
	// CPU is the share of pods without GPUs.
	CPU float64
	// Share is the share of GPU pods that share one GPU (gpu_milli < 1000).
	Share float64
	// Multi is the share of GPU pods asking for two GPUs or more; the
	// rest take one whole GPU.
	Multi float64
	// Spec is the share of GPU pods that name GPU models.
	Spec float64
	// SpecSets is how many distinct sets of GPU models the naming pods
	// use (each set 1 to 3 models, drawn with random popularity); 0 means 6.
	SpecSets int
	// Models are the models sets are drawn from; empty means every model
	// with at least 1% of the GPUs of openb:all_node.
	Models []string
	// Seed drives every random choice.
	Seed uint64
}

// DefaultMix returns a mixture with the base's own proportions and no
// pods naming GPU models.
func DefaultMix() Mix { return Mix{CPU: -1, Share: -1, Multi: -1, Spec: 0} }

// Validate checks the mixture's fields.
func (m Mix) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"cpu", m.CPU}, {"share", m.Share}, {"multi", m.Multi}, {"spec", m.Spec}} {
		if math.IsNaN(f.v) || f.v > 1 || (f.v < 0 && f.v != -1) {
			return fmt.Errorf("%w: %s=%v, want a share in [0, 1]", ErrMix, f.name, f.v)
		}
	}
	switch {
	case m.Share >= 0 && m.Multi >= 0 && m.Share+m.Multi > 1:
		return fmt.Errorf("%w: share=%v and multi=%v add up to more than 1", ErrMix, m.Share, m.Multi)
	case m.Pods < 0 || m.Pods > maxMixPods:
		return fmt.Errorf("%w: pods=%d, want 0 to %d", ErrMix, m.Pods, maxMixPods)
	case m.SpecSets < 0 || m.SpecSets > 64:
		return fmt.Errorf("%w: specsets=%d, want 0 to 64", ErrMix, m.SpecSets)
	case strings.HasPrefix(m.Base, MixPrefix):
		return fmt.Errorf("%w: base %q is itself a mixture", ErrMix, m.Base)
	}
	return nil
}

const maxMixPods = 1_000_000

// ParseMix reads a mixture reference "mix:KEY=VALUE,..." with keys base,
// pods, cpu, share, multi, spec, specsets, models (separated by |) and
// seed. Keys not given keep DefaultMix's values.
func ParseMix(ref string) (Mix, error) {
	body, ok := strings.CutPrefix(ref, MixPrefix)
	if !ok {
		return Mix{}, fmt.Errorf("%w: %q does not start with %q", ErrMix, ref, MixPrefix)
	}
	m := DefaultMix()
	seen := map[string]bool{}
	for _, kv := range strings.Split(body, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Mix{}, fmt.Errorf("%w: %q is not KEY=VALUE", ErrMix, kv)
		}
		if seen[k] {
			return Mix{}, fmt.Errorf("%w: %s given twice", ErrMix, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "base":
			m.Base = v
		case "pods":
			m.Pods, err = strconv.Atoi(v)
		case "cpu":
			m.CPU, err = strconv.ParseFloat(v, 64)
		case "share":
			m.Share, err = strconv.ParseFloat(v, 64)
		case "multi":
			m.Multi, err = strconv.ParseFloat(v, 64)
		case "spec":
			m.Spec, err = strconv.ParseFloat(v, 64)
		case "specsets":
			m.SpecSets, err = strconv.Atoi(v)
		case "models":
			m.Models = strings.Split(v, "|")
		case "seed":
			m.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return Mix{}, fmt.Errorf("%w: unknown key %q (have base, pods, cpu, share, multi, spec, specsets, models, seed)", ErrMix, k)
		}
		if err != nil {
			return Mix{}, fmt.Errorf("%w: %s: %v", ErrMix, k, err)
		}
	}
	return m, m.Validate()
}

// String is the mixture's reference (ParseMix(m.String()) == m).
func (m Mix) String() string {
	var b strings.Builder
	b.WriteString(MixPrefix)
	put := func(k, v string) {
		if b.Len() > len(MixPrefix) {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + v)
	}
	if m.Base != "" {
		put("base", m.Base)
	}
	if m.Pods != 0 {
		put("pods", strconv.Itoa(m.Pods))
	}
	for _, f := range []struct {
		k string
		v float64
	}{{"cpu", m.CPU}, {"share", m.Share}, {"multi", m.Multi}, {"spec", m.Spec}} {
		if f.v >= 0 {
			put(f.k, strconv.FormatFloat(f.v, 'g', -1, 64))
		}
	}
	if m.SpecSets != 0 {
		put("specsets", strconv.Itoa(m.SpecSets))
	}
	if len(m.Models) > 0 {
		put("models", strings.Join(m.Models, "|"))
	}
	put("seed", strconv.FormatUint(m.Seed, 10))
	return b.String()
}

// pod kinds of a mixture
const (
	kindCPU = iota
	kindShare
	kindWhole
	kindMulti
	numKinds
)

func podKind(p *sim.PodSpec) int {
	switch {
	case p.GPUs == 0:
		return kindCPU
	case p.GPUs == 1 && p.GPUMilli < sim.MilliGPU:
		return kindShare
	case p.GPUs == 1:
		return kindWhole
	}
	return kindMulti
}

// Generate draws the mixture's workload. It is deterministic in m.
func Generate(m Mix) (*PodList, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	base := m.Base
	if base == "" {
		base = "openb:" + Default
	}
	bl, err := LoadPods(base, nil)
	if err != nil {
		return nil, fmt.Errorf("mixture base: %w", err)
	}
	return m.From(base, bl)
}

// From draws the mixture's workload from base pod list bl (named base in
// errors) instead of loading m.Base.
func (m Mix) From(base string, bl *PodList) (*PodList, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var pools [numKinds][]int
	for i := range bl.Pods {
		k := podKind(&bl.Pods[i])
		pools[k] = append(pools[k], i)
	}
	n := m.Pods
	if n == 0 {
		n = len(bl.Pods)
	}
	gpuPods := len(bl.Pods) - len(pools[kindCPU])
	own := func(v float64, num, den int) float64 {
		if v >= 0 {
			return v
		}
		if den == 0 {
			return 0
		}
		return float64(num) / float64(den)
	}
	cpu := own(m.CPU, len(pools[kindCPU]), len(bl.Pods))
	share := own(m.Share, len(pools[kindShare]), gpuPods)
	multi := own(m.Multi, len(pools[kindMulti]), gpuPods)
	if share+multi > 1 {
		return nil, fmt.Errorf("%w: share %.3f and multi %.3f (some the base's own) add up to more than 1", ErrMix, share, multi)
	}
	p := [numKinds]float64{kindCPU: cpu, kindShare: (1 - cpu) * share, kindMulti: (1 - cpu) * multi}
	p[kindWhole] = 1 - p[kindCPU] - p[kindShare] - p[kindMulti]
	for k := range numKinds {
		if p[k] > 1e-12 && len(pools[k]) == 0 {
			return nil, fmt.Errorf("%w: %s has no pods of a kind the mixture asks for (%d of %d)", ErrMix, base, k, numKinds)
		}
	}
	rng := rand.New(rand.NewPCG(m.Seed, 0x6d1c))
	sets, weights, err := m.specSets(rng)
	if err != nil {
		return nil, err
	}
	out := &PodList{Pods: make([]sim.PodSpec, n), Timed: bl.Timed}
	for i := range n {
		u := rng.Float64()
		k := 0
		for k < numKinds-1 && (u >= p[k] || len(pools[k]) == 0) {
			u -= p[k]
			k++
		}
		src := bl.Pods[pools[k][rng.IntN(len(pools[k]))]]
		src.Name = fmt.Sprintf("mix-%06d", i)
		src.GPUSpec = nil
		if src.GPUs > 0 && m.Spec > 0 && rng.Float64() < m.Spec {
			src.GPUSpec = sets[pick(rng, weights)]
		}
		out.Pods[i] = src
	}
	return out, nil
}

// specSets draws the model sets of pods naming GPU models and their
// popularity.
func (m Mix) specSets(rng *rand.Rand) ([][]string, []float64, error) {
	if m.Spec <= 0 {
		return nil, nil, nil
	}
	models := m.Models
	if len(models) == 0 {
		var err error
		if models, err = commonModels(); err != nil {
			return nil, nil, err
		}
	}
	known := map[string]bool{}
	for _, g := range sim.KnownGPUModels() {
		known[g.Name] = true
	}
	for _, g := range models {
		if !known[g] {
			return nil, nil, fmt.Errorf("%w: models: %w %q", ErrMix, ErrUnknownSpec, g)
		}
	}
	k := m.SpecSets
	if k == 0 {
		k = 6
	}
	sets := make([][]string, k)
	weights := make([]float64, k)
	for i := range sets {
		size := 1 + rng.IntN(min(3, len(models)))
		perm := rng.Perm(len(models))[:size]
		slices.Sort(perm)
		for _, j := range perm {
			sets[i] = append(sets[i], models[j])
		}
		weights[i] = -math.Log(1 - rng.Float64()) // Dirichlet(1) popularity
	}
	return sets, weights, nil
}

func pick(rng *rand.Rand, w []float64) int {
	var sum float64
	for _, v := range w {
		sum += v
	}
	u := rng.Float64() * sum
	for i, v := range w {
		if u < v {
			return i
		}
		u -= v
	}
	return len(w) - 1
}

// commonModels lists the GPU models holding at least 1% of the GPUs of
// openb:all_node, by name.
func commonModels() ([]string, error) {
	nodes, err := LoadNodes("openb:"+AllNodes, nil)
	if err != nil {
		return nil, err
	}
	gpus := map[string]int{}
	var total int
	for _, n := range nodes {
		gpus[n.GPUModel] += n.GPUs
		total += n.GPUs
	}
	var out []string
	for g, c := range gpus {
		if g != "" && c*100 >= total {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}
