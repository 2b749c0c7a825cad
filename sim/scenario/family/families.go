package family

// Node kinds. Core zones hold amd64 mini-PCs and servers on SSDs and a
// GPU box (tainted: GPU work only); edge zones hold arm64 boards on SD
// cards and Jetson-class boards with an integrated GPU, on slower NICs.
var (
	nuc    = pool{name: "nuc", zone: "core", arch: "amd64", class: "minipc", cpu: 8000, mem: 32768, failures: 0.02, nic: 1000, idle: 8, perCore: 4}
	ipc    = pool{name: "ipc", zone: "core", arch: "amd64", class: "minipc", cpu: 8000, mem: 16384, failures: 0.01, nic: 1000, idle: 15, perCore: 5}
	server = pool{name: "server", zone: "core", arch: "amd64", class: "server", cpu: 16000, mem: 65536, failures: 0.01, nic: 10000, idle: 60, perCore: 6}
	big    = pool{name: "server", zone: "core", arch: "amd64", class: "server", cpu: 32000, mem: 131072, failures: 0.005, nic: 10000, idle: 90, perCore: 7}
	gpubox = pool{name: "gpubox", zone: "core", arch: "amd64", class: "gpu", cpu: 16000, mem: 65536, gpus: 1, gpuModel: "T4", failures: 0.01, nic: 10000, idle: 40, perCore: 6}
	pi     = pool{name: "pi", zone: "edge", arch: "arm64", class: "board", cpu: 4000, mem: 8192, failures: 0.05, nic: 100, idle: 3, perCore: 1.5}
	jetson = pool{name: "jetson", zone: "edge", arch: "arm64", class: "jetson", cpu: 8000, mem: 32768, gpus: 1, gpuModel: "Orin", failures: 0.03, nic: 1000, idle: 7, perCore: 2}
	ampere = pool{name: "arm", zone: "edge", arch: "arm64", class: "armserver", cpu: 16000, mem: 32768, failures: 0.01, nic: 1000, idle: 20, perCore: 2.5}
)

func n(p pool, lo, hi int) pool { p.min, p.max = lo, hi; return p }

func gpus(p pool, k int) pool { p.gpus = k; return p }

// Summer UTC offsets of the grids' home time zones (daylight time;
// Arizona keeps MST).
var offsets = map[string]int{"BPAT": -7, "CISO": -7, "AZPS": -7, "ERCO": -5, "MISO": -5, "SOCO": -4, "NYIS": -4, "PJM": -4}

var specs = []spec{
	{
		name:        "retail-stores",
		description: "retail stores: back-office mini-PCs, a server and a T4 box; shop-floor boards and a Jetson behind store Wi-Fi",
		role:        Training,
		sites:       [2]int{3, 5},
		pools:       []pool{n(nuc, 2, 3), n(server, 1, 1), n(gpubox, 1, 1), n(pi, 2, 3), n(jetson, 1, 1)},
		appSets:     [][]string{{"online-boutique"}, {"social-network", "hotel-reservation"}},
		appRates:    1, appLoad: 1.3,
		grids:     []string{"BPAT", "CISO", "MISO", "ERCO"},
		utcOffset: offsets,
		jobs: []job{
			{name: "stock-sync", weight: 5, lifetime: "20m", cpu: 250, mem: 512, usage: 0.85, spread: 0.4, qos: "BE", profile: "batch", net: 20},
			{name: "price-update", weight: 3, lifetime: "10m", cpu: 1000, mem: 1024, usage: 0.85, spread: 0.3, profile: "batch"},
			{name: "receipt-ocr", weight: 2, lifetime: "10m", cpu: 1500, mem: 2048, gpuMilli: 200, usage: 0.6, spread: 0.3, profile: "vision"},
			{name: "shelf-camera", weight: 2, lifetime: "15m", cpu: 1000, mem: 1024, usage: 0.85, spread: 0.3, profile: "vision", interference: 0.3, net: 30},
			{name: "nightly-report", weight: 0.25, lifetime: "30m", cpu: 4000, mem: 8192, usage: 0.9, spread: 0.2, arch: "amd64", qos: "BE", profile: "batch", interference: 0.8},
		},
		svcShare: 0.40, batchShare: 0.24, gpuShare: 0.25, edgeFill: 0.45, pipelineRate: 11,
		edgeUplink: uplink{loss: 0.01, flapsPerDay: 4, flapMinutes: 10, flapRTT: 800, flapLoss: 0.1},
		coreRTT:    3,
		v2:         recalibration{appLoad: 0.8, jobs: 1.15},
	},
	{
		name:        "factory-lines",
		description: "factories: control-room industrial PCs, a big server and a 2xT4 box; line-side Jetsons and boards on a noisy plant network",
		role:        Training,
		sites:       [2]int{2, 4},
		pools:       []pool{n(ipc, 3, 4), n(big, 1, 1), n(gpus(gpubox, 2), 1, 1), n(jetson, 2, 3), n(pi, 1, 2)},
		appSets:     [][]string{{"hotel-reservation"}, {"social-network", "online-boutique"}},
		appRates:    1, appLoad: 1.3,
		grids:     []string{"ERCO", "SOCO", "MISO"},
		utcOffset: offsets,
		jobs: []job{
			{name: "defect-inspection", weight: 4, lifetime: "15m", cpu: 500, mem: 2048, gpuMilli: 300, usage: 0.6, spread: 0.3, profile: "vision", net: 40},
			{name: "model-retrain", weight: 0.5, lifetime: "40m", cpu: 4000, mem: 16384, gpuMilli: 1000, arch: "amd64", qos: "BE", usage: 0.9, spread: 0.1, profile: "batch", interference: 0.5},
			{name: "shift-report", weight: 3, lifetime: "10m", cpu: 1000, mem: 2048, usage: 0.85, spread: 0.3, profile: "batch"},
			{name: "plc-aggregate", weight: 5, lifetime: "15m", cpu: 500, mem: 512, usage: 0.85, spread: 0.4, profile: "batch", net: 20},
			{name: "historian-compaction", weight: 0.4, lifetime: "20m", cpu: 2000, mem: 4096, arch: "amd64", usage: 0.85, spread: 0.2, qos: "BE", profile: "batch", interference: 1},
		},
		svcShare: 0.40, batchShare: 0.28, gpuShare: 0.35, edgeFill: 0.45, pipelineRate: 25,
		edgeUplink: uplink{loss: 0.005, flapsPerDay: 6, flapMinutes: 5, flapRTT: 1500, flapLoss: 0.3},
		coreRTT:    2,
		v2:         recalibration{appLoad: 0.8, jobs: 1},
	},
	{
		name:        "telco-pops",
		description: "telco points of presence: racks of big servers and a 2xT4 box; cell-site arm servers and boards on microwave backhaul",
		role:        Training,
		sites:       [2]int{3, 4},
		pools:       []pool{n(big, 2, 2), n(gpus(gpubox, 2), 1, 1), n(ampere, 1, 2), n(pi, 1, 2)},
		appSets:     [][]string{{"online-boutique", "social-network", "hotel-reservation"}, {"social-network", "hotel-reservation", "online-boutique"}},
		appRates:    1.5, appLoad: 1.3,
		grids:     []string{"CISO", "ERCO", "SOCO", "BPAT"},
		utcOffset: offsets,
		jobs: []job{
			{name: "video-transcode", weight: 2, lifetime: "15m", cpu: 2000, mem: 4096, gpuMilli: 500, arch: "amd64", usage: 0.8, spread: 0.3, profile: "vision", interference: 0.6, net: 200},
			{name: "log-shipper", weight: 5, lifetime: "30m", cpu: 250, mem: 256, usage: 0.85, spread: 0.4, profile: "batch", net: 50},
			{name: "analytics", weight: 0.6, lifetime: "30m", cpu: 4000, mem: 8192, arch: "amd64", qos: "BE", usage: 0.9, spread: 0.2, profile: "batch", interference: 0.8},
			{name: "cdn-prefetch", weight: 3, lifetime: "10m", cpu: 500, mem: 1024, usage: 0.85, spread: 0.4, profile: "web", net: 300},
		},
		svcShare: 0.44, batchShare: 0.31, gpuShare: 0.35, edgeFill: 0.45, pipelineRate: 18,
		edgeUplink: uplink{loss: 0.003, flapsPerDay: 3, flapMinutes: 15, flapRTT: 600, flapLoss: 0.05},
		coreRTT:    4,
		v2:         recalibration{appLoad: 0.65, jobs: 1},
	},
	{
		name:        "rail-stations",
		description: "railway stations (held out): ticket-office mini-PCs, a server and a T4 box; platform boards and a Jetson over a flaky link; TrainTicket and synthetic graphs",
		role:        HeldOut,
		sites:       [2]int{3, 5},
		pools:       []pool{n(nuc, 2, 3), n(server, 1, 1), n(gpubox, 1, 1), n(pi, 2, 4), n(jetson, 1, 1)},
		appSets:     [][]string{{"train-ticket"}},
		synthetic:   1,
		appRates:    1, appLoad: 1,
		grids:     []string{"NYIS", "PJM", "AZPS"},
		utcOffset: offsets,
		jobs: []job{
			{name: "platform-camera", weight: 3, lifetime: "15m", cpu: 1000, mem: 1024, usage: 0.85, spread: 0.3, profile: "vision", interference: 0.3, net: 40},
			{name: "crowd-count", weight: 2, lifetime: "10m", cpu: 1000, mem: 2048, gpuMilli: 250, usage: 0.7, spread: 0.3, profile: "vision"},
			{name: "timetable-sync", weight: 5, lifetime: "20m", cpu: 250, mem: 512, usage: 0.85, spread: 0.4, qos: "BE", profile: "batch", net: 10},
			{name: "fare-report", weight: 0.25, lifetime: "30m", cpu: 4000, mem: 8192, usage: 0.9, spread: 0.2, arch: "amd64", qos: "BE", profile: "batch", interference: 0.8},
		},
		svcShare: 0.32, batchShare: 0.25, gpuShare: 0.30, edgeFill: 0.5, pipelineRate: 21,
		edgeUplink: uplink{loss: 0.015, flapsPerDay: 5, flapMinutes: 8, flapRTT: 3000, flapLoss: 0.4},
		coreRTT:    3,
		v2:         recalibration{appLoad: 0.4, jobs: 1.2},
	},
	{
		name:        "media-campus",
		description: "university campus buildings (held out): servers and a 2xT4 box; lab boards and Jetsons over building links; mediaMicroservices, a seen app and a synthetic graph",
		role:        HeldOut,
		sites:       [2]int{3, 4},
		pools:       []pool{n(server, 2, 3), n(gpus(gpubox, 2), 1, 1), n(pi, 3, 4), n(jetson, 1, 2)},
		appSets:     [][]string{{"media-microservices"}, {"hotel-reservation", "social-network"}},
		synthetic:   1,
		appRates:    1, appLoad: 1.2,
		grids:     []string{"AZPS", "NYIS", "PJM"},
		utcOffset: offsets,
		jobs: []job{
			{name: "transcode", weight: 2, lifetime: "20m", cpu: 2000, mem: 4096, gpuMilli: 500, arch: "amd64", usage: 0.8, spread: 0.3, profile: "vision", interference: 0.6, net: 150},
			{name: "thumbnail", weight: 5, lifetime: "5m", cpu: 500, mem: 512, usage: 0.85, spread: 0.4, profile: "web"},
			{name: "lecture-capture", weight: 2, lifetime: "45m", cpu: 1000, mem: 1024, usage: 0.85, spread: 0.3, profile: "vision", net: 60},
			{name: "research-batch", weight: 0.2, lifetime: "40m", cpu: 4000, mem: 16384, arch: "amd64", qos: "BE", usage: 0.95, spread: 0.2, profile: "batch", interference: 0.7},
		},
		svcShare: 0.36, batchShare: 0.195, gpuShare: 0.22, edgeFill: 0.65, pipelineRate: 8,
		edgeUplink: uplink{loss: 0.004, flapsPerDay: 3, flapMinutes: 10, flapRTT: 700, flapLoss: 0.08},
		coreRTT:    2,
		v2:         recalibration{appLoad: 0.8, jobs: 1},
	},
}
