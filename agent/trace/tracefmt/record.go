package tracefmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// Kind is what an Event records.
type Kind uint8

// Event kinds.
const (
	// PodArrival: a pod was created (Time is its creationTimestamp); Pod
	// holds its requests as the simulator models them.
	PodArrival Kind = 1 + iota
	// PodDeletion: a pod left (Time is its deletionTimestamp, or when the
	// recorder saw it go); Pod holds its UID, namespace and name.
	PodDeletion
	// PodBinding: a pod was bound to Pod.Node.
	PodBinding
	// NodeUsage: a node's telemetry summary (kubefmt.TelemetrySummary) as of Time.
	NodeUsage
	// EdgeRate: a pod-to-pod call rate seen by one node's flow collector
	// over the window ending at Time.
	EdgeRate
	// NodeInfo: a node's capacity and placement attributes (kept as the
	// recorder's current view of the cluster, not as an event).
	NodeInfo
	maxKind = NodeInfo
)

func (k Kind) String() string {
	switch k {
	case PodArrival:
		return "pod-arrival"
	case PodDeletion:
		return "pod-deletion"
	case PodBinding:
		return "pod-binding"
	case NodeUsage:
		return "node-usage"
	case EdgeRate:
		return "edge-rate"
	case NodeInfo:
		return "node-info"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one record of the trace. Exactly the payload its Kind names is
// set (Pod for the pod kinds, Usage, Edge or Node).
type Event struct {
	Kind  Kind
	Time  time.Time
	Pod   *Pod
	Usage *Usage
	Edge  *Edge
	Node  *Node
}

// Pod is a pod in the simulator's terms (sim.PodSpec): requests in
// milli-CPU and MiB, GPU count, share per device (milli) and accepted
// models, QoS class, priority, CPU limit and, when the pod publishes it
// (edgesched.io/cpu-usage), its measured CPU use as a share of its request.
type Pod struct {
	UID       string
	Namespace string
	Name      string
	// Service is the service the pod is a replica of ("" for none): its
	// edgesched.io/service, app.kubernetes.io/name or app label, else its
	// controller (a ReplicaSet's Deployment, a StatefulSet, a DaemonSet).
	Service string
	// Node is the node the pod is bound to ("" while pending).
	Node          string
	CPUMilli      int64
	MemoryMiB     int64
	GPUs          int32
	GPUMilli      int64
	GPUModels     []string
	QoS           sim.QoS
	Priority      int32
	Arch          sim.Arch
	CPULimitMilli int64
	// CPUUsage is the pod's own edgesched.io/cpu-usage (0: not given).
	CPUUsage float64
}

// Usage is a node's telemetry summary with what the node had requested
// when it was read, so the export can turn it into per-pod CPU use.
type Usage struct {
	Node string
	// CPU and Mem are the node's utilisation shares in [0, 1].
	CPU, Mem float64
	// CPUMilli is the node's allocatable CPU; RequestedCPUMilli the sum of
	// the CPU requests of the pods bound to it.
	CPUMilli, RequestedCPUMilli int64
}

// PodRef names a pod.
type PodRef = kubefmt.PodRef

// Edge is a call rate between two pods, as one node saw it.
type Edge struct {
	Src, Dst       PodRef
	CallsPerSecond float64
	// Reporter is the node whose agent measured it.
	Reporter string
}

// Node is a node's capacity and placement attributes.
type Node struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int32
	GPUModel  string
	Zone      string
	Arch      sim.Arch
	// FailureRate is the node's edgesched.io/failure-rate (expected
	// failures per day, in [0, sim.MaxFailureDay]; 0: not given).
	FailureRate float64
}

// Limits of the record format (a decoder refuses anything beyond them).
const (
	// recordVersion is the version EncodeEvent writes; DecodeEvent also
	// reads version 1, whose node records have no failure rate.
	recordVersion = 2
	// MaxString bounds every string of a record (bytes).
	MaxString = 1024
	// MaxModels bounds a pod's accepted GPU models.
	MaxModels = 64
	// MaxRecordBytes bounds one encoded record.
	MaxRecordBytes = 16 << 10
	// MaxShare bounds a pod's CPU usage share (Pod.CPUUsage) and MaxRate
	// call rates (Edge.CallsPerSecond).
	MaxShare = 64
	MaxRate  = sim.MaxCallRate
	// MaxGPUModel bounds the GPU model names trace.PodRecord and
	// trace.NodeRecord keep: 63 bytes, a Kubernetes label value's limit. A node's model is
	// its edgesched.io/gpu-model label (at most 63 bytes in a real
	// cluster), so a longer accepted name matches no node either way;
	// cutting it keeps the pod's record, which 64 names of up to 1,024
	// bytes could push past MaxRecordBytes. Node models are cut the same
	// way, so names that matched still match.
	MaxGPUModel = 63
)

// minTime and maxTime bound an event's time: Unix nanoseconds in an int64
// (1677-09-21 to 2262-04-11). Validate refuses a time outside them
// (time.Time.UnixNano would overflow, silently).
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// ErrRecord wraps every refusal of DecodeEvent and EncodeEvent.
var ErrRecord = errors.New("trace: bad record")

// EncodeEvent renders e in the on-disk format:
//
//	u8 version (2) | u8 kind | varint time (Unix nanoseconds) | payload
//
// where the payload is the kind's fields in a fixed order: strings as
// uvarint length and bytes, integers as varints, floats as 8 bytes
// little-endian IEEE 754, enums as one byte.
func EncodeEvent(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 128)
	b = append(b, recordVersion, byte(e.Kind))
	b = binary.AppendVarint(b, e.Time.UnixNano())
	switch e.Kind {
	case PodArrival:
		p := e.Pod
		b = putStrings(b, p.UID, p.Namespace, p.Name, p.Service, p.Node)
		b = binary.AppendVarint(b, p.CPUMilli)
		b = binary.AppendVarint(b, p.MemoryMiB)
		b = binary.AppendVarint(b, int64(p.GPUs))
		b = binary.AppendVarint(b, p.GPUMilli)
		b = binary.AppendUvarint(b, uint64(len(p.GPUModels)))
		b = putStrings(b, p.GPUModels...)
		b = append(b, byte(p.QoS), byte(p.Arch))
		b = binary.AppendVarint(b, int64(p.Priority))
		b = binary.AppendVarint(b, p.CPULimitMilli)
		b = putFloat(b, p.CPUUsage)
	case PodDeletion, PodBinding:
		p := e.Pod
		b = putStrings(b, p.UID, p.Namespace, p.Name, p.Node)
	case NodeUsage:
		u := e.Usage
		b = putStrings(b, u.Node)
		b = putFloat(b, u.CPU)
		b = putFloat(b, u.Mem)
		b = binary.AppendVarint(b, u.CPUMilli)
		b = binary.AppendVarint(b, u.RequestedCPUMilli)
	case EdgeRate:
		d := e.Edge
		b = putStrings(b, d.Src.Namespace, d.Src.Name, d.Dst.Namespace, d.Dst.Name, d.Reporter)
		b = putFloat(b, d.CallsPerSecond)
	case NodeInfo:
		n := e.Node
		b = putStrings(b, n.Name, n.GPUModel, n.Zone)
		b = binary.AppendVarint(b, n.CPUMilli)
		b = binary.AppendVarint(b, n.MemoryMiB)
		b = binary.AppendVarint(b, int64(n.GPUs))
		b = append(b, byte(n.Arch))
		b = putFloat(b, n.FailureRate)
	}
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %s record of %d bytes exceeds %d", ErrRecord, e.Kind, len(b), MaxRecordBytes)
	}
	return b, nil
}

func putStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func putFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

// Validate checks an event's fields against the format's limits.
func (e *Event) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrRecord, e.Kind, fmt.Sprintf(format, args...))
	}
	set := 0
	for _, p := range []bool{e.Pod != nil, e.Usage != nil, e.Edge != nil, e.Node != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return bad("%d payloads set, want exactly one", set)
	}
	if e.Time.IsZero() {
		return bad("no time")
	}
	if e.Time.Before(minTime) || e.Time.After(maxTime) {
		return bad("time outside the record's range [%v, %v]: %v", minTime, maxTime, e.Time)
	}
	str := func(name, s string, required bool) error {
		if len(s) > MaxString {
			return bad("%s is %d bytes (at most %d)", name, len(s), MaxString)
		}
		if required && s == "" {
			return bad("%s missing", name)
		}
		return nil
	}
	var errs []error
	switch e.Kind {
	case PodArrival, PodDeletion, PodBinding:
		p := e.Pod
		if p == nil {
			return bad("no pod")
		}
		errs = append(errs, str("uid", p.UID, true), str("namespace", p.Namespace, true), str("name", p.Name, true),
			str("service", p.Service, false), str("node", p.Node, e.Kind == PodBinding))
		if e.Kind == PodArrival {
			switch {
			case p.CPUMilli < 0 || p.CPUMilli > sim.MaxQuantity || p.MemoryMiB < 0 || p.MemoryMiB > sim.MaxQuantity:
				errs = append(errs, bad("requests %d milli-CPU, %d MiB out of range", p.CPUMilli, p.MemoryMiB))
			case p.GPUs < 0 || p.GPUs > sim.MaxGPUsPerNode || p.GPUMilli < 0 || p.GPUMilli > sim.MilliGPU || (p.GPUs == 0) != (p.GPUMilli == 0):
				errs = append(errs, bad("gpu request %d x %d milli out of range", p.GPUs, p.GPUMilli))
			case len(p.GPUModels) > MaxModels:
				errs = append(errs, bad("%d gpu models (at most %d)", len(p.GPUModels), MaxModels))
			case p.QoS > sim.QoSGuaranteed || p.Arch > sim.ArchARM64:
				errs = append(errs, bad("qos %d or arch %d unknown", p.QoS, p.Arch))
			case p.CPULimitMilli < 0 || p.CPULimitMilli > sim.MaxQuantity:
				errs = append(errs, bad("cpu limit %d out of range", p.CPULimitMilli))
			case !share(p.CPUUsage, MaxShare):
				errs = append(errs, bad("cpu usage %v not a share in [0, %d]", p.CPUUsage, MaxShare))
			}
			for _, m := range p.GPUModels {
				errs = append(errs, str("gpu model", m, true))
			}
		}
	case NodeUsage:
		u := e.Usage
		if u == nil {
			return bad("no usage")
		}
		errs = append(errs, str("node", u.Node, true))
		if !share(u.CPU, 1) || !share(u.Mem, 1) || u.CPUMilli < 0 || u.CPUMilli > sim.MaxQuantity || u.RequestedCPUMilli < 0 || u.RequestedCPUMilli > sim.MaxQuantity {
			errs = append(errs, bad("values out of range (cpu %v, mem %v, %d/%d milli-CPU)", u.CPU, u.Mem, u.RequestedCPUMilli, u.CPUMilli))
		}
	case EdgeRate:
		d := e.Edge
		if d == nil {
			return bad("no edge")
		}
		errs = append(errs, str("src namespace", d.Src.Namespace, true), str("src name", d.Src.Name, true),
			str("dst namespace", d.Dst.Namespace, true), str("dst name", d.Dst.Name, true), str("reporter", d.Reporter, true))
		if !share(d.CallsPerSecond, MaxRate) {
			errs = append(errs, bad("rate %v not in [0, %g]", d.CallsPerSecond, float64(MaxRate)))
		}
	case NodeInfo:
		n := e.Node
		if n == nil {
			return bad("no node")
		}
		errs = append(errs, str("name", n.Name, true), str("gpu model", n.GPUModel, false), str("zone", n.Zone, false))
		if n.CPUMilli < 0 || n.CPUMilli > sim.MaxQuantity || n.MemoryMiB < 0 || n.MemoryMiB > sim.MaxQuantity ||
			n.GPUs < 0 || n.GPUs > sim.MaxGPUsPerNode || n.Arch > sim.ArchARM64 {
			errs = append(errs, bad("capacity out of range (%d milli-CPU, %d MiB, %d GPUs, arch %d)", n.CPUMilli, n.MemoryMiB, n.GPUs, n.Arch))
		}
		if !share(n.FailureRate, sim.MaxFailureDay) {
			errs = append(errs, bad("failure rate %v not in [0, %g]", n.FailureRate, float64(sim.MaxFailureDay)))
		}
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrRecord, uint8(e.Kind))
	}
	return errors.Join(errs...)
}

func share(v, hi float64) bool { return !math.IsNaN(v) && v >= 0 && v <= hi }

// decoder reads a record; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrRecord, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: truncated or overlong varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: truncated or overlong uvarint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(what string) string {
	if d.err != nil {
		return ""
	}
	l, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: truncated length", what)
		return ""
	}
	if l > MaxString || l > uint64(len(d.b)-n) {
		d.fail("%s: length %d exceeds the record or %d", what, l, MaxString)
		return ""
	}
	s := string(d.b[n : n+int(l)])
	d.b = d.b[n+int(l):]
	return s
}

func (d *decoder) float(what string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("%s: truncated float", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("%s: truncated", what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// int32In reads a varint that must fit an int32.
func (d *decoder) int32In(what string) int32 {
	v := d.varint(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("%s: %d out of range", what, v)
		return 0
	}
	return int32(v)
}

// DecodeEvent parses one record, refusing unknown versions and kinds,
// truncation, trailing bytes, oversized strings and out-of-range values
// (everything EncodeEvent would refuse to write).
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if len(b) > MaxRecordBytes {
		return e, fmt.Errorf("%w: %d bytes exceeds %d", ErrRecord, len(b), MaxRecordBytes)
	}
	if len(b) < 2 {
		return e, fmt.Errorf("%w: %d bytes, too short", ErrRecord, len(b))
	}
	version := b[0]
	if version != recordVersion && version != 1 {
		return e, fmt.Errorf("%w: version %d, this build reads 1 and %d", ErrRecord, version, recordVersion)
	}
	e.Kind = Kind(b[1])
	if e.Kind == 0 || e.Kind > maxKind {
		return e, fmt.Errorf("%w: unknown kind %d", ErrRecord, b[1])
	}
	d := &decoder{b: b[2:]}
	e.Time = time.Unix(0, d.varint("time")).UTC()
	switch e.Kind {
	case PodArrival:
		p := &Pod{UID: d.str("uid"), Namespace: d.str("namespace"), Name: d.str("name"), Service: d.str("service"), Node: d.str("node")}
		p.CPUMilli, p.MemoryMiB = d.varint("cpu"), d.varint("memory")
		p.GPUs, p.GPUMilli = d.int32In("gpus"), d.varint("gpu milli")
		n := d.uvarint("gpu models")
		if n > MaxModels {
			d.fail("%d gpu models (at most %d)", n, MaxModels)
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			p.GPUModels = append(p.GPUModels, d.str("gpu model"))
		}
		p.QoS, p.Arch = sim.QoS(d.byte1("qos")), sim.Arch(d.byte1("arch"))
		p.Priority, p.CPULimitMilli = d.int32In("priority"), d.varint("cpu limit")
		p.CPUUsage = d.float("cpu usage")
		e.Pod = p
	case PodDeletion, PodBinding:
		e.Pod = &Pod{UID: d.str("uid"), Namespace: d.str("namespace"), Name: d.str("name"), Node: d.str("node")}
	case NodeUsage:
		u := &Usage{Node: d.str("node")}
		u.CPU, u.Mem = d.float("cpu"), d.float("mem")
		u.CPUMilli, u.RequestedCPUMilli = d.varint("cpu milli"), d.varint("requested cpu milli")
		e.Usage = u
	case EdgeRate:
		x := &Edge{Src: PodRef{Namespace: d.str("src namespace"), Name: d.str("src name")}, Dst: PodRef{Namespace: d.str("dst namespace"), Name: d.str("dst name")}, Reporter: d.str("reporter")}
		x.CallsPerSecond = d.float("rate")
		e.Edge = x
	case NodeInfo:
		n := &Node{Name: d.str("name"), GPUModel: d.str("gpu model"), Zone: d.str("zone")}
		n.CPUMilli, n.MemoryMiB, n.GPUs = d.varint("cpu"), d.varint("memory"), d.int32In("gpus")
		n.Arch = sim.Arch(d.byte1("arch"))
		if version >= 2 {
			n.FailureRate = d.float("failure rate")
		}
		e.Node = n
	}
	if d.err != nil {
		return Event{}, d.err
	}
	if len(d.b) != 0 {
		return Event{}, fmt.Errorf("%w: %d trailing bytes after a %s record", ErrRecord, len(d.b), e.Kind)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// RecordHeader reads a record's kind and time (Unix nanoseconds) without
// decoding the rest; ok is false when they are not well-formed (a version
// DecodeEvent reads, a known kind, a time). The store uses it to skip
// records by kind and time.
func RecordHeader(v []byte) (kind Kind, unixNano int64, ok bool) {
	if len(v) < 3 || (v[0] != recordVersion && v[0] != 1) || Kind(v[1]) < PodArrival || Kind(v[1]) > maxKind {
		return 0, 0, false
	}
	t, ok := RecordTime(v)
	return Kind(v[1]), t, ok
}

// RecordTime reads a record's time (Unix nanoseconds) without decoding
// the rest, or checking its version and kind; ok is false when it is not
// well-formed.
func RecordTime(v []byte) (unixNano int64, ok bool) {
	if len(v) < 3 {
		return 0, false
	}
	d := decoder{b: v[2:]}
	t := d.varint("time")
	return t, d.err == nil
}
