package sim

import (
	"errors"
	"math"
	"testing"
)

func newTinyState(t *testing.T, pods ...PodSpec) *State {
	t.Helper()
	if len(pods) == 0 {
		pods = []PodSpec{pod("x", 1, 1, 0, 0)}
	}
	c := tinyCluster()
	c.Nodes[1].Taints = []Taint{{Key: "gpu", Value: "t4", Effect: EffectNoSchedule}}
	c.Nodes[1].Labels = map[string]string{"disk": "ssd"}
	env, err := NewEnv(c, &Workload{Pods: pods}, EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(env)
	for i := range env.Pods {
		if _, err := st.AddPod(env.Pods[i]); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestFeasible(t *testing.T) {
	tol := []Toleration{{Key: "gpu", Exists: true, AnyEffect: true}}
	tests := []struct {
		name string
		pod  PodSpec
		want [3]bool // g8, g2 (tainted T4, disk=ssd), c0 (arm64)
	}{
		{"small cpu pod", pod("a", 1000, 1024, 0, 0), [3]bool{true, false, true}},
		{"tolerates taint", PodSpec{Name: "a", CPU: 1000, Memory: 1024, Tolerations: tol, Delete: NoDeletion}, [3]bool{true, true, true}},
		{"too much cpu", pod("a", 70000, 1024, 0, 0), [3]bool{true, false, false}},
		{"too much memory", pod("a", 1000, 300000, 0, 0), [3]bool{true, false, false}},
		{"shared gpu", pod("a", 1000, 1024, 1, 300), [3]bool{true, false, false}},
		{"eight gpus", pod("a", 1000, 1024, 8, 1000), [3]bool{true, false, false}},
		{"nine gpus", pod("a", 1000, 1024, 9, 1000), [3]bool{false, false, false}},
		{"only T4", PodSpec{Name: "a", CPU: 1, GPUs: 1, GPUMilli: 1000, GPUSpec: []string{"T4"}, Tolerations: tol, Delete: NoDeletion}, [3]bool{false, true, false}},
		{"arm64 image", PodSpec{Name: "a", CPU: 1, Arch: ArchARM64, Delete: NoDeletion}, [3]bool{false, false, true}},
		{"node selector", PodSpec{Name: "a", CPU: 1, NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: tol, Delete: NoDeletion}, [3]bool{false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newTinyState(t, tt.pod)
			for n := range 3 {
				if got := st.Feasible(n, &st.Pods[0]); got != tt.want[n] {
					t.Errorf("Feasible(node %s) = %v, want %v", st.Nodes[n].Name, got, tt.want[n])
				}
			}
		})
	}
}

func TestBindUnbindAccounting(t *testing.T) {
	st := newTinyState(t,
		PodSpec{Name: "share", CPU: 4000, Memory: 8192, GPUs: 1, GPUMilli: 300, CPUUsage: 0.5, Service: "web", Delete: NoDeletion},
		PodSpec{Name: "whole", CPU: 8000, Memory: 16384, GPUs: 2, GPUMilli: 1000, CPUUsage: 0.5, Delete: NoDeletion},
		PodSpec{Name: "free", CPU: 0, Memory: 0, Delete: NoDeletion},
	)
	fragBefore := st.FragGPU
	if err := st.Bind(0, 0, []int{3}); err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(1, 0, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Bind(2, 2, nil); err != nil {
		t.Fatal(err)
	}
	nd := &st.Nodes[0]
	// 96000 - 4000 - 8000 cpu; GPUs 0,1 full, 3 at 700.
	if nd.CPUFree != 84000 || nd.GPUFree[3] != 700 || nd.GPUFree[0] != 0 || nd.FullFree != 5 || nd.MaxFree != 1000 || nd.GPUFreeTotal != 5700 {
		t.Errorf("node g8 after binds: cpu %d gpus %v full %d max %d total %d", nd.CPUFree, nd.GPUFree, nd.FullFree, nd.MaxFree, nd.GPUFreeTotal)
	}
	// Used CPU: (4000 + 8000) * 0.5 = 6000.
	if nd.CPUUsed != 6000 || st.UsedCPU != 6000 {
		t.Errorf("used cpu = %v / %v, want 6000", nd.CPUUsed, st.UsedCPU)
	}
	// The request-less pod counts 100 milli-CPU and 200 MiB for scoring.
	if st.Nodes[2].NZCPU != DefaultNonZeroMilliCPU || st.Nodes[2].NZMem != DefaultNonZeroMemMiB {
		t.Errorf("non-zero requests = %d, %d", st.Nodes[2].NZCPU, st.Nodes[2].NZMem)
	}
	if want := (Resources{CPU: 12000, Mem: 24576, GPU: 2300}); st.Alloc != want {
		t.Errorf("Alloc = %+v, want %+v", st.Alloc, want)
	}
	if st.TagCount(0, 0) != 1 || st.TagCount(0, 2) != 1 || st.TagKinds(0) != 2 {
		t.Errorf("tags: share %d, 2-gpu %d, kinds %d", st.TagCount(0, 0), st.TagCount(0, 2), st.TagKinds(0))
	}
	web, _ := st.Env.ServiceIndex("web")
	if st.ServiceCount(web) != 1 || st.ServiceZoneCount(web, 0) != 1 {
		t.Errorf("service counts = %d, zone a %d", st.ServiceCount(web), st.ServiceZoneCount(web, 0))
	}
	if len(st.Running()) != 3 {
		t.Errorf("running = %v", st.Running())
	}
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 0, 2} {
		if err := st.Unbind(id); err != nil {
			t.Fatal(err)
		}
	}
	if st.Alloc != (Resources{}) || math.Abs(st.UsedCPU) > 1e-9 || st.TagKinds(0) != 0 || len(st.Running()) != 0 {
		t.Errorf("after unbind: alloc %+v used %v kinds %d running %v", st.Alloc, st.UsedCPU, st.TagKinds(0), st.Running())
	}
	if math.Abs(st.FragGPU-fragBefore) > 1e-9 {
		t.Errorf("fragmentation %v did not return to %v", st.FragGPU, fragBefore)
	}
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestBindRefusesWithoutChange(t *testing.T) {
	st := newTinyState(t, pod("a", 1000, 1024, 1, 600), pod("b", 1000, 1024, 1, 600), pod("c", 100000, 1, 0, 0))
	if err := st.Bind(0, 0, []int{2}); err != nil {
		t.Fatal(err)
	}
	before := st.Nodes[0]
	tests := []struct {
		name string
		id   int32
		node int
		gpus []int
	}{
		{"device too full", 1, 0, []int{2}},
		{"device out of range", 1, 0, []int{8}},
		{"too few devices", 1, 0, nil},
		{"device twice", 1, 0, []int{3, 3}},
		{"already running", 0, 0, []int{4}},
		{"does not fit", 2, 0, nil},
		{"no such node", 1, 7, []int{0}},
		{"no such pod", 9, 0, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := st.Bind(tt.id, tt.node, tt.gpus)
			if !errors.Is(err, ErrPlacement) {
				t.Fatalf("Bind error = %v, want ErrPlacement", err)
			}
			if st.Nodes[0].CPUFree != before.CPUFree || st.Nodes[0].GPUFree[2] != 400 || st.Nodes[0].Version != before.Version {
				t.Fatal("refused bind changed the node")
			}
		})
	}
	if err := st.Unbind(1); !errors.Is(err, ErrPlacement) {
		t.Errorf("Unbind of a pending pod = %v, want ErrPlacement", err)
	}
}

func TestBestFitGPUs(t *testing.T) {
	st := newTinyState(t, pod("a", 1, 1, 1, 500), pod("b", 1, 1, 1, 200), pod("c", 1, 1, 3, 1000), pod("d", 1, 1, 1, 900))
	nd := &st.Nodes[0]
	copy(nd.GPUFree, []int64{1000, 600, 300, 1000, 500, 0, 1000, 1000})
	tests := []struct {
		id   int32
		want []int
	}{
		{0, []int{4}},       // 500: fits 1000,600,1000,500,1000,1000; least free is device 4 (500)
		{1, []int{2}},       // 200: device 2 (300) is the tightest fit
		{2, []int{0, 3, 6}}, // whole GPUs: lowest-indexed fully free devices
		{3, []int{0}},       // 900: only full devices fit; the first
	}
	for _, tt := range tests {
		got := st.BestFitGPUs(0, &st.Pods[tt.id], nil)
		if len(got) != len(tt.want) {
			t.Fatalf("pod %d: devices %v, want %v", tt.id, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("pod %d: devices %v, want %v", tt.id, got, tt.want)
			}
		}
	}
}

// RoomFor sums the free resources of the nodes a pod may use apart from
// their free amounts. The tiny cluster: g8 (96 cores, 8 G2 GPUs, amd64),
// g2 (64 cores, 2 T4s, tainted gpu=t4, disk=ssd), c0 (32 cores, arm64).
func TestRoomFor(t *testing.T) {
	tol := []Toleration{{Key: "gpu", Exists: true, AnyEffect: true}}
	spec := func(p PodSpec) PodSpec { p.Delete = NoDeletion; return p }
	tests := []struct {
		name string
		pod  PodSpec
		down int // node to fail first, -1 none
		want bool
	}{
		// g8 + c0 = 128 cores; g2 is tainted
		{"more than any node, less than the eligible sum", spec(PodSpec{Name: "a", CPU: 100000}), -1, true},
		{"more than the eligible sum", spec(PodSpec{Name: "a", CPU: 130000}), -1, false},
		{"the toleration adds g2's 64 cores", spec(PodSpec{Name: "a", CPU: 130000, Tolerations: tol}), -1, true},
		{"arm64 sees c0's 32 cores only", spec(PodSpec{Name: "a", CPU: 40000, Arch: ArchARM64}), -1, false},
		{"a failed node's room does not count", spec(PodSpec{Name: "a", CPU: 100000}), 0, false},
		{"no eligible node at all", spec(PodSpec{Name: "a", Arch: ArchARM64}), 2, false},
		{"memory counts", spec(PodSpec{Name: "a", CPU: 1, Memory: 393216 + 131072 + 1}), -1, false},
		// GPU share: 8 on g8 and, tolerated, 2 on g2
		{"ten whole GPUs over two nodes", spec(PodSpec{Name: "a", CPU: 1, GPUs: 10, GPUMilli: 1000, Tolerations: tol}), -1, true},
		{"three T4s of two", spec(PodSpec{Name: "a", CPU: 1, GPUs: 3, GPUMilli: 1000, GPUSpec: []string{"T4"}, Tolerations: tol}), -1, false},
		{"node selector", spec(PodSpec{Name: "a", CPU: 65000, NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: tol}), -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newTinyState(t, tt.pod)
			if tt.down >= 0 {
				st.SetDown(tt.down, true)
			}
			for n := range st.Nodes {
				if st.Feasible(n, &st.Pods[0]) && !tt.want {
					t.Fatalf("node %s fits the pod: not a case for RoomFor", st.Nodes[n].Name)
				}
			}
			if got := st.RoomFor(&st.Pods[0]); got != tt.want {
				t.Errorf("RoomFor = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestArchShares binds pods to the tiny cluster (amd64: g8 96000 and g2
// 64000 milli-CPU; arm64: c0 32000; 192000 in all) and checks the
// architecture totals and shares against sums done by hand.
func TestArchShares(t *testing.T) {
	st := newTinyState(t,
		PodSpec{Name: "amd", CPU: 60000, Memory: 1, Arch: ArchAMD64, Delete: NoDeletion},
		PodSpec{Name: "any", CPU: 20000, Memory: 1, Delete: NoDeletion},
		PodSpec{Name: "arm", CPU: 8000, Memory: 1, Arch: ArchARM64, Delete: NoDeletion},
	)
	if p, f := st.ArchShares(ArchAMD64); p != 0 || f != 160.0/192 {
		t.Errorf("empty cluster: amd64 shares %v, %v; want 0 (nothing runs), 160/192", p, f)
	}
	steps := []struct {
		pod, node       int
		pinA, freeA     float64 // amd64's shares after the binding
		pinR, freeR     float64 // arm64's
		freeCPU, pinned int64   // amd64 free CPU, CPU pinned to amd64
	}{
		// amd64-only 60000 on g8: all that runs is pinned to amd64;
		// 100000 of the 132000 free is amd64's
		{0, 0, 1, 100.0 / 132, 0, 32.0 / 132, 100000, 60000},
		// the 20000 that runs anywhere, on c0 (g2 is tainted): 60 of 80
		// pinned to amd64; amd64 100000 of 112000 free
		{1, 2, 0.75, 100.0 / 112, 0, 12.0 / 112, 100000, 60000},
		// arm64-only 8000 on c0: 60 and 8 of 88 pinned; free 100000 and
		// 4000 of 104000
		{2, 2, 60.0 / 88, 100.0 / 104, 8.0 / 88, 4.0 / 104, 100000, 60000},
	}
	for _, s := range steps {
		if err := st.Bind(int32(s.pod), s.node, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if st.ArchFree[ArchAMD64] != s.freeCPU || st.ArchPinned[ArchAMD64] != s.pinned {
			t.Errorf("after pod %d: amd64 free %d pinned %d, want %d, %d", s.pod, st.ArchFree[ArchAMD64], st.ArchPinned[ArchAMD64], s.freeCPU, s.pinned)
		}
		for _, c := range []struct {
			a         Arch
			pin, free float64
		}{{ArchAMD64, s.pinA, s.freeA}, {ArchARM64, s.pinR, s.freeR}} {
			if p, f := st.ArchShares(c.a); math.Abs(p-c.pin) > 1e-12 || math.Abs(f-c.free) > 1e-12 {
				t.Errorf("after pod %d: %v shares %v, %v; want %v, %v", s.pod, c.a, p, f, c.pin, c.free)
			}
		}
	}
	if p, f := st.ArchShares(ArchAny); p != 0 || f != 0 {
		t.Errorf("shares of ArchAny = %v, %v; want 0, 0", p, f)
	}
	// Unbinding everything returns the totals to the empty cluster's.
	for _, id := range append([]int32(nil), st.Running()...) {
		if err := st.Unbind(id); err != nil {
			t.Fatal(err)
		}
	}
	if st.ArchFree != [NumArch]int64{0, 160000, 32000} || st.ArchPinned != [NumArch]int64{} {
		t.Errorf("after unbinding: free %v pinned %v", st.ArchFree, st.ArchPinned)
	}
}

// TestPodCrossZoneShare: one replica's share of its own dependency call
// rate that crosses zones, against shares counted by hand. Services: web
// calls api at 30/s, api calls db at 10/s; zones a and b.
func TestPodCrossZoneShare(t *testing.T) {
	node := func(name, zone string) NodeSpec {
		return NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: ArchAMD64, Zone: zone}
	}
	cluster := &Cluster{Name: "two-zones", Zones: []Zone{{Name: "a"}, {Name: "b"}},
		Nodes: []NodeSpec{node("a0", "a"), node("b0", "b")}}
	svc := func(name, service string) PodSpec {
		return PodSpec{Name: name, CPU: 100, Memory: 64, Service: service, Delete: NoDeletion}
	}
	wl := &Workload{Name: "chain",
		Pods:         []PodSpec{svc("web-0", "web"), svc("api-0", "api"), svc("db-0", "db"), svc("db-1", "db"), svc("db-2", "db")},
		Dependencies: []Dependency{{From: "web", To: "api", CallsPerSecond: 30}, {From: "api", To: "db", CallsPerSecond: 10}}}
	env, err := NewEnv(cluster, wl, EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	service := func(name string) int {
		for i, s := range env.Services {
			if s == name {
				return i
			}
		}
		t.Fatalf("no service %q", name)
		return -1
	}
	web, api, db := service("web"), service("api"), service("db")
	st := NewState(env)
	if _, ok := st.PodCrossZoneShare(api, 0); ok {
		t.Error("nothing runs: want ok false")
	}
	// web-0 in a; db-0, db-1 in a; db-2 in b (pods 0, 2, 3, 4).
	for i, n := range map[int]int{0: 0, 2: 0, 3: 0, 4: 1} {
		id, err := st.AddPod(env.Pods[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Bind(id, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		service int
		zone    int
		want    float64
		wantOK  bool
	}{
		// api in a: web's 30/s stay (web runs only in a); of db's 10/s,
		// one replica in three is in b: crossing 10/3 of 40.
		{"api in a", api, 0, (10.0 / 3) / 40, true},
		// api in b: all 30 from web cross, 2/3 of the 10 to db cross.
		{"api in b", api, 1, (30 + 10*2.0/3) / 40, true},
		// web calls only api, which does not run yet.
		{"web, callee not running", web, 0, 0, false},
		// db in b: its caller api does not run.
		{"db, caller not running", db, 1, 0, false},
	}
	for _, tt := range tests {
		got, ok := st.PodCrossZoneShare(tt.service, tt.zone)
		if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: share %v ok %v, want %v ok %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}
