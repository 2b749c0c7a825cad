package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/sim"
)

// MaxFailedClasses bounds Result.Failures: the classes with the most
// failed pods are kept.
const MaxFailedClasses = 20

// FailedClass counts the failed pods of one class in a run: pods with
// identical requests, architecture, accepted GPU models, node selector,
// tolerations, service and load profile (sim.Pod.Shape, but with a
// selector's values instead of one shape per constrained pod, and the
// service and profile, which tell apart jobs of equal requests). It says
// which pods a policy fails, for error analysis (docs/sim.md, "Which pods
// fail"). Pods of different names can share a class: Example is one.
type FailedClass struct {
	// Class numbers the classes in the order of their first pod in the
	// workload.
	Class int32 `json:"class"`
	// Example names the class's first pod in the workload; Service is
	// the class's service ("" for none) and Profile its load profile (""
	// for steady use).
	Example string `json:"example"`
	Service string `json:"service,omitempty"`
	Profile string `json:"profile,omitempty"`
	// CPU (milli-CPU), Memory (MiB), GPUs and GPUMilli are the class's
	// requests; Arch its architecture ("any" for multi-arch images);
	// GPUModels the GPU models it accepts (empty: any); NodeSelector and
	// Tolerations its constraints ("" for none; tolerations as
	// key=value:effect, or key:exists, comma-separated).
	CPU          int64    `json:"cpu_milli"`
	Memory       int64    `json:"memory_mib"`
	GPUs         int32    `json:"gpus,omitempty"`
	GPUMilli     int64    `json:"gpu_milli,omitempty"`
	Arch         string   `json:"arch"`
	GPUModels    []string `json:"gpu_models,omitempty"`
	NodeSelector string   `json:"node_selector,omitempty"`
	Tolerations  string   `json:"tolerations,omitempty"`
	// Arrived counts the class's pods that arrived, Failed those that
	// failed, and WithRoom the failed ones whose eligible nodes had room
	// for them in aggregate (the measure failures_with_room, per class).
	Arrived  int `json:"arrived"`
	Failed   int `json:"failed"`
	WithRoom int `json:"failed_with_room"`
}

// classCounts accumulates per-class arrivals and failures of a run.
type classCounts struct {
	of                        []int32 // class of each template (env.Pods index)
	first                     []int32 // first template of each class
	arrived, failed, withRoom []int
}

type classKey struct {
	cpu, mem, milli int64
	gpus            int32
	mask            uint64
	arch            sim.Arch
	selector, tol   string
	service, prof   int32
}

// newClassCounts returns the counters of env's classes, or inert ones
// (every method a no-op) when !on.
func newClassCounts(env *sim.Env, on bool) classCounts {
	if !on {
		return classCounts{}
	}
	c := classCounts{of: make([]int32, len(env.Pods))}
	idx := map[classKey]int32{}
	for i := range env.Pods {
		p := &env.Pods[i]
		k := classKey{cpu: p.CPU, mem: p.Mem, milli: p.GPUMilli, gpus: p.GPUs, mask: p.GPUMask, arch: p.Arch, service: p.Service, prof: p.Profile}
		if p.Constrained {
			spec := env.Spec(p)
			k.selector, k.tol = selectorString(spec.NodeSelector), tolerationsString(spec.Tolerations)
		}
		n, ok := idx[k]
		if !ok {
			n = int32(len(c.first))
			idx[k] = n
			c.first = append(c.first, int32(i))
		}
		c.of[i] = n
	}
	n := len(c.first)
	c.arrived, c.failed, c.withRoom = make([]int, n), make([]int, n), make([]int, n)
	return c
}

func selectorString(sel map[string]string) string {
	if len(sel) == 1 {
		for k, v := range sel {
			return k + "=" + v
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", k, sel[k])
	}
	return b.String()
}

func tolerationsString(ts []sim.Toleration) string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		s := t.Key
		if t.Exists {
			s += ":exists"
		} else {
			s += "=" + t.Value
		}
		if !t.AnyEffect {
			s += ":" + t.Effect.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (c *classCounts) arrive(p *sim.Pod) {
	if c.of != nil {
		c.arrived[c.of[p.Template]]++
	}
}

func (c *classCounts) fail(p *sim.Pod, withRoom bool) {
	if c.of == nil {
		return
	}
	k := c.of[p.Template]
	c.failed[k]++
	if withRoom {
		c.withRoom[k]++
	}
}

// top returns the MaxFailedClasses classes with the most failed pods, most
// first (ties: the lower class first); nil when no pod failed.
func (c *classCounts) top(env *sim.Env) []FailedClass {
	var classes []int32
	for k, n := range c.failed {
		if n > 0 {
			classes = append(classes, int32(k))
		}
	}
	slices.SortFunc(classes, func(a, b int32) int {
		return cmp.Or(cmp.Compare(c.failed[b], c.failed[a]), cmp.Compare(a, b))
	})
	if len(classes) > MaxFailedClasses {
		classes = classes[:MaxFailedClasses]
	}
	var out []FailedClass
	for _, k := range classes {
		p := &env.Pods[c.first[k]]
		spec := env.Spec(p)
		var prof string
		if p.Profile > 0 && int(p.Profile) < len(env.Profiles) {
			prof = env.Profiles[p.Profile].Name
		}
		out = append(out, FailedClass{
			Class: k, Example: spec.Name, Service: spec.Service, Profile: prof,
			CPU: p.CPU, Memory: p.Mem, GPUs: p.GPUs, GPUMilli: p.GPUMilli, Arch: p.Arch.String(),
			GPUModels: slices.Clone(spec.GPUSpec), NodeSelector: selectorString(spec.NodeSelector), Tolerations: tolerationsString(spec.Tolerations),
			Arrived: c.arrived[k], Failed: c.failed[k], WithRoom: c.withRoom[k],
		})
	}
	return out
}
