package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// MilliGPU is the share of one GPU device in milli-GPU units, as in the
// openb trace: a pod asking for 460 milli-GPU uses 46% of one device.
const MilliGPU = 1000

// NoDeletion marks a pod that never leaves the cluster on its own.
const NoDeletion int64 = -1

// Bounds that keep every sum and product of the simulator inside int64 and
// every loop finite: capacities and requests (milli-CPU, MiB) up to 1e12,
// times up to 1e10 s (317 years), call rates up to 1e9/s, RTTs up to 1e6 ms.
const (
	MaxQuantity   = 1_000_000_000_000
	MaxTime       = 10_000_000_000
	MaxCallRate   = 1e9
	MaxRTTMs      = 1e6
	MaxWatts      = 1e7
	MaxCarbon     = 1e5
	MaxFailureDay = 1e6
	MaxNetMbps    = 1e7
	// MaxBackground bounds NodeSpec.Background.
	MaxBackground = 0.95
)

// Errors returned by validation. They are wrapped with the name of the
// offending object and field, so errors.Is can classify them.
var (
	ErrInvalid      = errors.New("sim: invalid value")
	ErrUnknownRef   = errors.New("sim: unknown reference")
	ErrDuplicate    = errors.New("sim: duplicate name")
	ErrUnknownModel = errors.New("sim: unknown GPU model")
)

// Arch is a CPU architecture. Nodes have exactly one; pods either need one
// (a single-arch image) or run anywhere (ArchAny, a multi-arch image).
type Arch uint8

// Architectures.
const (
	ArchAny Arch = iota
	ArchAMD64
	ArchARM64
)

// NumArch is the number of Arch values: arrays indexed by Arch have it.
const NumArch = 3

// ParseArch accepts the Kubernetes spellings (amd64, arm64), their common
// aliases, and "", "any" or "multi" for ArchAny.
func ParseArch(s string) (Arch, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "any", "multi":
		return ArchAny, nil
	case "amd64", "x86_64", "x86-64":
		return ArchAMD64, nil
	case "arm64", "aarch64":
		return ArchARM64, nil
	}
	return ArchAny, fmt.Errorf("%w: architecture %q (want amd64, arm64 or any)", ErrInvalid, s)
}

func (a Arch) String() string {
	switch a {
	case ArchAMD64:
		return "amd64"
	case ArchARM64:
		return "arm64"
	}
	return "any"
}

// QoS is a pod's quality-of-service class. The openb trace uses LS
// (latency-sensitive), Burstable, BE (best effort) and Guaranteed.
type QoS uint8

// QoS classes.
const (
	QoSBurstable QoS = iota
	QoSLS
	QoSBE
	QoSGuaranteed
)

// ParseQoS accepts the openb class names and the Kubernetes ones; an empty
// string is Burstable, the Kubernetes default for a pod with requests only.
func ParseQoS(s string) (QoS, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "burstable":
		return QoSBurstable, nil
	case "ls", "latency-sensitive":
		return QoSLS, nil
	case "be", "besteffort", "best-effort":
		return QoSBE, nil
	case "guaranteed":
		return QoSGuaranteed, nil
	}
	return QoSBurstable, fmt.Errorf("%w: qos %q (want LS, Burstable, BE or Guaranteed)", ErrInvalid, s)
}

func (q QoS) String() string {
	switch q {
	case QoSLS:
		return "LS"
	case QoSBE:
		return "BE"
	case QoSGuaranteed:
		return "Guaranteed"
	}
	return "Burstable"
}

// TaintEffect is the effect of a node taint.
type TaintEffect uint8

// Taint effects, as in Kubernetes. PreferNoSchedule never blocks placement.
const (
	EffectNoSchedule TaintEffect = iota
	EffectPreferNoSchedule
	EffectNoExecute
)

// ParseTaintEffect parses a Kubernetes taint effect name.
func ParseTaintEffect(s string) (TaintEffect, error) {
	switch s {
	case "NoSchedule", "":
		return EffectNoSchedule, nil
	case "PreferNoSchedule":
		return EffectPreferNoSchedule, nil
	case "NoExecute":
		return EffectNoExecute, nil
	}
	return EffectNoSchedule, fmt.Errorf("%w: taint effect %q (want NoSchedule, PreferNoSchedule or NoExecute)", ErrInvalid, s)
}

func (e TaintEffect) String() string {
	switch e {
	case EffectPreferNoSchedule:
		return "PreferNoSchedule"
	case EffectNoExecute:
		return "NoExecute"
	}
	return "NoSchedule"
}

// Taint repels pods that do not tolerate it.
type Taint struct {
	Key    string
	Value  string
	Effect TaintEffect
}

// Toleration lets a pod land on a tainted node, with the Kubernetes
// matching rules: Exists ignores the value, an empty key with Exists
// tolerates every taint, and AnyEffect matches all effects.
type Toleration struct {
	Key       string
	Exists    bool
	Value     string
	Effect    TaintEffect
	AnyEffect bool
}

// Tolerates reports whether t tolerates taint.
func (t Toleration) Tolerates(taint Taint) bool {
	if !t.AnyEffect && t.Effect != taint.Effect {
		return false
	}
	if t.Key == "" {
		return t.Exists
	}
	if t.Key != taint.Key {
		return false
	}
	return t.Exists || t.Value == taint.Value
}

// GPUModel describes a GPU type that nodes carry and pods may ask for.
type GPUModel struct {
	Name      string
	MemoryMiB int64
	// Watts is the board power at full use; 0 means DefaultGPUWatts.
	Watts float64
}

// DefaultGPUWatts is the power assumed for a GPU model without a figure.
const DefaultGPUWatts = 250

// KnownGPUModels are the GPU types of the openb trace with their memory
// (from the trace's publisher) and typical board power (vendor data sheets;
// G2 and G3 are anonymised in the trace, so they get the default).
func KnownGPUModels() []GPUModel {
	return []GPUModel{
		{Name: "A10", MemoryMiB: 22731, Watts: 150},
		{Name: "A100", MemoryMiB: 81251, Watts: 400},
		{Name: "G2", Watts: DefaultGPUWatts},
		{Name: "G3", Watts: DefaultGPUWatts},
		{Name: "P100", MemoryMiB: 16280, Watts: 250},
		{Name: "T4", MemoryMiB: 15109, Watts: 70},
		{Name: "V100M16", MemoryMiB: 16160, Watts: 300},
		{Name: "V100M32", MemoryMiB: 32510, Watts: 300},
	}
}

// gpuWatts are typical board powers by GPU model: the openb models'
// (KnownGPUModels) and edge GPUs the trace does not name (vendor data
// sheets; Jetson boards at the power mode the built-in scenarios assume).
var gpuWatts = func() map[string]float64 {
	m := map[string]float64{"Orin": 25, "Xavier": 20, "L4": 72, "A2": 60}
	for _, g := range KnownGPUModels() {
		if g.Watts > 0 {
			m[g.Name] = g.Watts
		}
	}
	return m
}()

// GPUWatts is the typical board power of a GPU model by name
// (DefaultGPUWatts for one without a figure). It does not change what an
// Env assumes (a cluster's own GPUModels do); the scheduler uses it where
// a cluster gives no figure.
func GPUWatts(name string) float64 {
	if w, ok := gpuWatts[name]; ok {
		return w
	}
	return DefaultGPUWatts
}

// CarbonZone is a grid region with an hourly carbon-intensity curve in
// gCO2/kWh. The curve repeats: hour h of the run uses Curve[h % len(Curve)].
type CarbonZone struct {
	Name  string
	Curve []float64
}

// Zone is a failure and network domain (a site, a rack, a region).
type Zone struct {
	Name string
	// CarbonZone names the zone's grid region; empty means a region with
	// the zone's own name, which must then exist.
	CarbonZone string
	// Uplink is the zone's link to the other zones (loss, flaps); the zero
	// value is a reliable link.
	Uplink disrupt.Uplink
}

// ZonePair is one measured round-trip time between two zones.
type ZonePair struct {
	A, B string
	Ms   float64
}

// Network gives round-trip times between zones in milliseconds.
type Network struct {
	// IntraZoneMs is the RTT between two pods in the same zone.
	IntraZoneMs float64
	// InterZoneMs is the RTT between different zones not listed in Pairs.
	InterZoneMs float64
	// Pairs overrides InterZoneMs for specific zone pairs (symmetric).
	Pairs []ZonePair
}

// DefaultNetwork is a LAN inside a zone and a WAN hop between zones.
func DefaultNetwork() Network { return Network{IntraZoneMs: 0.5, InterZoneMs: 30} }

// PowerModel gives the power a node draws for the work placed on it. Idle
// power is not attributed to pods, so it is only reported, never scored.
type PowerModel struct {
	IdleWatts    float64
	WattsPerCore float64
	// WattsPerGPU overrides the GPU model's power when non-zero.
	WattsPerGPU float64
}

// DefaultPower returns a power model for an architecture: server-class
// amd64 cores at 8 W, arm64 board cores at 2 W.
func DefaultPower(a Arch) PowerModel {
	if a == ArchARM64 {
		return PowerModel{IdleWatts: 3, WattsPerCore: 2}
	}
	return PowerModel{IdleWatts: 60, WattsPerCore: 8}
}

// NodeSpec is a node as declared: its capacity and its fixed attributes.
type NodeSpec struct {
	Name     string
	CPU      int64 // milli-CPU
	Memory   int64 // MiB
	GPUs     int
	GPUModel string // "" for a node without GPUs
	Arch     Arch
	Zone     string
	// CarbonZone overrides the zone's grid region.
	CarbonZone string
	Labels     map[string]string
	Taints     []Taint
	// FailureRate is the expected number of node failures per day.
	FailureRate float64
	// Power is the node's power model; nil means DefaultPower(Arch).
	Power *PowerModel
	// NICMbps is the node's network interface speed; 0 means the load
	// model's default (1 Gbit/s).
	NICMbps float64
	// Background is the share of the node's CPU busy with work outside
	// Kubernetes (system daemons, other software on an edge board), in
	// [0, MaxBackground]: what its telemetry measures and its pods' run
	// queue and latency meet, never what the scheduler sees as requests.
	// 0: none.
	Background float64
}

// Validate checks a node on its own (references are checked by NewEnv).
func (n *NodeSpec) Validate() error {
	switch {
	case n.Name == "":
		return fmt.Errorf("%w: node without a name", ErrInvalid)
	case n.CPU <= 0 || n.CPU > MaxQuantity:
		return fmt.Errorf("node %s: %w: cpu must be in (0, %d], got %d", n.Name, ErrInvalid, int64(MaxQuantity), n.CPU)
	case n.Memory <= 0 || n.Memory > MaxQuantity:
		return fmt.Errorf("node %s: %w: memory must be in (0, %d], got %d", n.Name, ErrInvalid, int64(MaxQuantity), n.Memory)
	case n.GPUs < 0 || n.GPUs > MaxGPUsPerNode:
		return fmt.Errorf("node %s: %w: gpus must be in [0, %d], got %d", n.Name, ErrInvalid, MaxGPUsPerNode, n.GPUs)
	case n.GPUs > 0 && n.GPUModel == "":
		return fmt.Errorf("node %s: %w: %d gpus but no gpu model", n.Name, ErrInvalid, n.GPUs)
	case n.GPUs == 0 && n.GPUModel != "":
		return fmt.Errorf("node %s: %w: gpu model %q but 0 gpus", n.Name, ErrInvalid, n.GPUModel)
	case n.Arch == ArchAny:
		return fmt.Errorf("node %s: %w: arch must be amd64 or arm64", n.Name, ErrInvalid)
	case !finiteNonNeg(n.FailureRate) || n.FailureRate > MaxFailureDay:
		return fmt.Errorf("node %s: %w: failure rate must be a finite number in [0, %g], got %v", n.Name, ErrInvalid, float64(MaxFailureDay), n.FailureRate)
	case n.Power != nil && (!inRange(n.Power.IdleWatts, MaxWatts) || !inRange(n.Power.WattsPerCore, MaxWatts) || !inRange(n.Power.WattsPerGPU, MaxWatts)):
		return fmt.Errorf("node %s: %w: power figures must be finite and in [0, %g]", n.Name, ErrInvalid, float64(MaxWatts))
	case !inRange(n.NICMbps, MaxNetMbps):
		return fmt.Errorf("node %s: %w: nic speed must be finite and in [0, %g] Mbit/s, got %v", n.Name, ErrInvalid, float64(MaxNetMbps), n.NICMbps)
	case !inRange(n.Background, MaxBackground):
		return fmt.Errorf("node %s: %w: background CPU share must be finite and in [0, %g], got %v", n.Name, ErrInvalid, float64(MaxBackground), n.Background)
	}
	return nil
}

// MaxGPUsPerNode bounds the devices of one node (the largest openb node has 8).
const MaxGPUsPerNode = 64

// Cluster is the static description of a heterogeneous cluster.
type Cluster struct {
	Name        string
	Zones       []Zone
	CarbonZones []CarbonZone
	// Network gives zone RTTs; nil means DefaultNetwork().
	Network *Network
	// GPUModels lists the GPU types nodes and pods may name; at most 64.
	GPUModels []GPUModel
	Nodes     []NodeSpec
	// LoadProfiles are the usage profiles pods may follow (PodSpec.Profile).
	LoadProfiles []nodeload.Profile
	// Disruptions enables node failures in replay (uplink flaps come with
	// the zones' Uplink).
	Disruptions disrupt.Config
}

// PodSpec is one task of a workload.
type PodSpec struct {
	Name   string
	CPU    int64 // milli-CPU request
	Memory int64 // MiB request
	GPUs   int
	// GPUMilli is the share of each of the GPUs, in (0, 1000]; below 1000
	// only with GPUs == 1 (GPU sharing).
	GPUMilli int64
	// GPUSpec lists the GPU models the pod accepts; empty accepts any.
	GPUSpec  []string
	QoS      QoS
	Priority int32
	// Create and Delete are seconds from the start of the trace; Delete is
	// NoDeletion for a pod that never leaves.
	Create, Delete int64
	// Service names the service this pod is a replica of ("" for none).
	Service      string
	Arch         Arch
	NodeSelector map[string]string
	Tolerations  []Toleration
	// CPUUsage is the CPU actually used as a share of the request; 0 means
	// "unknown" and the workload's usage model fills it in.
	CPUUsage float64
	// CPULimit is the CPU limit in milli-CPU, 0 when the pod sets none.
	CPULimit int64
	// MemUsage is the memory actually used as a share of the request; 0
	// means the CPU usage's share.
	MemUsage float64
	// Profile names the load profile (Cluster.LoadProfiles) the pod's use
	// follows over time; "" is steady use.
	Profile string
	// Interference is how much the pod's CPU use disturbs its neighbours,
	// as a share of its use added to the node's run-queue demand, [0, 4].
	Interference float64
	// NetMbps is the pod's mean network throughput in Mbit/s.
	NetMbps float64
}

// Validate checks a pod on its own (references are checked by NewEnv).
func (p *PodSpec) Validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("%w: pod without a name", ErrInvalid)
	case p.CPU < 0 || p.CPU > MaxQuantity:
		return fmt.Errorf("pod %s: %w: cpu must be in [0, %d], got %d", p.Name, ErrInvalid, int64(MaxQuantity), p.CPU)
	case p.Memory < 0 || p.Memory > MaxQuantity:
		return fmt.Errorf("pod %s: %w: memory must be in [0, %d], got %d", p.Name, ErrInvalid, int64(MaxQuantity), p.Memory)
	case p.GPUs < 0 || p.GPUs > MaxGPUsPerNode:
		return fmt.Errorf("pod %s: %w: gpus must be in [0, %d], got %d", p.Name, ErrInvalid, MaxGPUsPerNode, p.GPUs)
	case p.GPUs == 0 && p.GPUMilli != 0:
		return fmt.Errorf("pod %s: %w: gpu_milli must be 0 when gpus is 0, got %d", p.Name, ErrInvalid, p.GPUMilli)
	case p.GPUs > 0 && (p.GPUMilli <= 0 || p.GPUMilli > MilliGPU):
		return fmt.Errorf("pod %s: %w: gpu_milli must be in (0, %d] when gpus > 0, got %d", p.Name, ErrInvalid, MilliGPU, p.GPUMilli)
	case p.GPUs > 1 && p.GPUMilli != MilliGPU:
		return fmt.Errorf("pod %s: %w: a pod with %d gpus must take whole gpus (gpu_milli %d), got %d", p.Name, ErrInvalid, p.GPUs, MilliGPU, p.GPUMilli)
	case p.GPUs == 0 && len(p.GPUSpec) > 0:
		return fmt.Errorf("pod %s: %w: gpu_spec set on a pod without gpus", p.Name, ErrInvalid)
	case p.Create < 0 || p.Create > MaxTime:
		return fmt.Errorf("pod %s: %w: creation time must be in [0, %d] s, got %d", p.Name, ErrInvalid, int64(MaxTime), p.Create)
	case p.Delete != NoDeletion && p.Delete > MaxTime:
		return fmt.Errorf("pod %s: %w: deletion time must be at most %d s, got %d", p.Name, ErrInvalid, int64(MaxTime), p.Delete)
	case p.Delete != NoDeletion && p.Delete < p.Create:
		return fmt.Errorf("pod %s: %w: deletion time %d is before creation time %d", p.Name, ErrInvalid, p.Delete, p.Create)
	case !finiteNonNeg(p.CPUUsage) || p.CPUUsage > 64:
		return fmt.Errorf("pod %s: %w: cpu usage must be a finite share in [0, 64], got %v", p.Name, ErrInvalid, p.CPUUsage)
	case p.CPULimit < 0 || p.CPULimit > MaxQuantity:
		return fmt.Errorf("pod %s: %w: cpu limit must be in [0, %d], got %d", p.Name, ErrInvalid, int64(MaxQuantity), p.CPULimit)
	case !inRange(p.MemUsage, 64) || !inRange(p.Interference, 4) || !inRange(p.NetMbps, MaxNetMbps):
		return fmt.Errorf("pod %s: %w: memory usage (share, [0, 64]) %v, interference ([0, 4]) %v or network (Mbit/s, [0, %g]) %v out of range", p.Name, ErrInvalid, p.MemUsage, p.Interference, float64(MaxNetMbps), p.NetMbps)
	}
	return nil
}

// GPUDemand is the pod's GPU request in milli-GPU.
func (p *PodSpec) GPUDemand() int64 { return int64(p.GPUs) * p.GPUMilli }

// Dependency is a directed call edge between two services.
type Dependency struct {
	From, To       string
	CallsPerSecond float64
}

// Workload is the tasks to schedule and the service-dependency graph.
type Workload struct {
	Name         string
	Pods         []PodSpec
	Dependencies []Dependency
	// Services lists services that exist even without pods (for edges);
	// services named by pods are added automatically.
	Services []string
	// Untimed marks a workload whose pods carry no creation times (an
	// openb file without the column): it can be inflated, not replayed.
	Untimed bool
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// inRange reports whether v is a finite number in [0, hi].
func inRange(v, hi float64) bool { return finiteNonNeg(v) && v <= hi }
