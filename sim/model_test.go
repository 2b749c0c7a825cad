package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseArch(t *testing.T) {
	tests := []struct {
		in      string
		want    Arch
		wantErr bool
	}{
		{"", ArchAny, false},
		{"any", ArchAny, false},
		{"multi", ArchAny, false},
		{"amd64", ArchAMD64, false},
		{"x86_64", ArchAMD64, false},
		{"ARM64", ArchARM64, false},
		{"aarch64", ArchARM64, false},
		{"riscv64", ArchAny, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseArch(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseArch(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseArch(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestParseQoS(t *testing.T) {
	tests := []struct {
		in      string
		want    QoS
		wantErr bool
	}{
		{"LS", QoSLS, false},
		{"Burstable", QoSBurstable, false},
		{"", QoSBurstable, false},
		{"BE", QoSBE, false},
		{"BestEffort", QoSBE, false},
		{"Guaranteed", QoSGuaranteed, false},
		{"gold", QoSBurstable, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseQoS(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseQoS(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTolerates(t *testing.T) {
	taint := Taint{Key: "gpu", Value: "true", Effect: EffectNoSchedule}
	tests := []struct {
		name string
		tol  Toleration
		want bool
	}{
		{"equal match", Toleration{Key: "gpu", Value: "true", Effect: EffectNoSchedule}, true},
		{"equal wrong value", Toleration{Key: "gpu", Value: "false", Effect: EffectNoSchedule}, false},
		{"exists ignores value", Toleration{Key: "gpu", Exists: true, Effect: EffectNoSchedule}, true},
		{"wrong effect", Toleration{Key: "gpu", Exists: true, Effect: EffectNoExecute}, false},
		{"any effect", Toleration{Key: "gpu", Exists: true, AnyEffect: true}, true},
		{"empty key exists tolerates all", Toleration{Exists: true, AnyEffect: true}, true},
		{"empty key equal tolerates nothing", Toleration{AnyEffect: true}, false},
		{"other key", Toleration{Key: "ssd", Exists: true, AnyEffect: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.Tolerates(taint); got != tt.want {
				t.Errorf("Tolerates = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeSpecValidate(t *testing.T) {
	ok := NodeSpec{Name: "n", CPU: 1000, Memory: 1024, Arch: ArchAMD64}
	tests := []struct {
		name   string
		mutate func(*NodeSpec)
		want   string // substring of the error, "" for valid
	}{
		{"valid", func(*NodeSpec) {}, ""},
		{"no name", func(n *NodeSpec) { n.Name = "" }, "without a name"},
		{"zero cpu", func(n *NodeSpec) { n.CPU = 0 }, "cpu must be in (0, 1000000000000], got 0"},
		{"huge cpu", func(n *NodeSpec) { n.CPU = 5e18 }, "cpu must be in (0, 1000000000000]"},
		{"negative memory", func(n *NodeSpec) { n.Memory = -1 }, "memory must be in (0,"},
		{"gpus without model", func(n *NodeSpec) { n.GPUs = 2 }, "no gpu model"},
		{"model without gpus", func(n *NodeSpec) { n.GPUModel = "T4" }, "but 0 gpus"},
		{"too many gpus", func(n *NodeSpec) { n.GPUs = 65; n.GPUModel = "T4" }, "gpus must be in"},
		{"no arch", func(n *NodeSpec) { n.Arch = ArchAny }, "arch must be"},
		{"NaN failure rate", func(n *NodeSpec) { n.FailureRate = math.NaN() }, "failure rate"},
		{"infinite power", func(n *NodeSpec) { n.Power = &PowerModel{WattsPerCore: math.Inf(1)} }, "power"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.mutate(&n)
			err := n.Validate()
			checkErr(t, err, tt.want)
		})
	}
}

func TestPodSpecValidate(t *testing.T) {
	ok := PodSpec{Name: "p", CPU: 100, Memory: 64, Delete: NoDeletion}
	tests := []struct {
		name   string
		mutate func(*PodSpec)
		want   string
	}{
		{"valid", func(*PodSpec) {}, ""},
		{"valid shared gpu", func(p *PodSpec) { p.GPUs, p.GPUMilli = 1, 250 }, ""},
		{"valid whole gpus", func(p *PodSpec) { p.GPUs, p.GPUMilli = 4, 1000 }, ""},
		{"negative cpu", func(p *PodSpec) { p.CPU = -1 }, "cpu must be in [0, 1000000000000], got -1"},
		{"milli without gpus", func(p *PodSpec) { p.GPUMilli = 10 }, "gpu_milli must be 0"},
		{"gpus without milli", func(p *PodSpec) { p.GPUs = 1 }, "gpu_milli must be in"},
		{"milli over 1000", func(p *PodSpec) { p.GPUs, p.GPUMilli = 1, 1001 }, "gpu_milli must be in"},
		{"shared multi gpu", func(p *PodSpec) { p.GPUs, p.GPUMilli = 2, 500 }, "whole gpus"},
		{"spec without gpus", func(p *PodSpec) { p.GPUSpec = []string{"T4"} }, "gpu_spec set"},
		{"deleted before created", func(p *PodSpec) { p.Create, p.Delete = 10, 5 }, "before creation"},
		{"created too late", func(p *PodSpec) { p.Create = MaxTime + 1 }, "creation time must be in"},
		{"deleted too late", func(p *PodSpec) { p.Delete = math.MaxInt64 }, "deletion time must be at most"},
		{"huge request", func(p *PodSpec) { p.Memory = MaxQuantity + 1 }, "memory must be in [0,"},
		{"NaN usage", func(p *PodSpec) { p.CPUUsage = math.NaN() }, "cpu usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			tt.mutate(&p)
			checkErr(t, p.Validate(), tt.want)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
