// Package trace is the site's workload trace: what ran on the cluster, in
// the simulator's terms, kept in bbolt so the site leader can build its
// digital twin (a sim/scenario file) for local training, and so
// `edgectl trace export` can hand it to `edgectl sim` and `edgectl train`.
//
// A Recorder watches every Pod and Node through client-go informers and
// records pod arrivals (at their creationTimestamp), bindings and
// deletions with the requests the scheduler plugin reads (CPU, memory,
// GPU count, share and models, QoS, priority), node usage from the agents'
// telemetry annotation (kubefmt), and pod-to-pod call rates from
// the flows annotation each agent publishes for its node
// (kubefmt.FlowsAnnotation and its format,
// fed by ObserveFlows from the node's eBPF flow collector); a summary or
// flows window more than kubefmt.MaxTelemetryClockSkew ahead of the
// recorder's clock (a node whose clock ran ahead) is counted
// (RecorderStats.Skewed) and not recorded, so it cannot become the node's
// high-water mark and hold back its correct samples. Every agent of
// a site records (warm standbys), so the history survives a change of
// leader. A Store keeps the events with bounded retention (age and count,
// oldest first, in the same transaction as the append; and samples and
// flows dated more than kubefmt.MaxTelemetryClockSkew ahead of its clock,
// wherever they are, which no read returns either) plus the pods and
// nodes that are current, and exports them with Export; ServiceDependencies
// computes the service call graph over a window (the same aggregation as
// the export's dependencies), which the site leader publishes for the
// scheduler plugin.
//
// The events (tracefmt.Event) and their on-disk records, a small
// versioned binary format (tracefmt.EncodeEvent, tracefmt.DecodeEvent;
// fuzzed), are package agent/trace/tracefmt's. Store.Append refuses a
// record the format cannot hold on its own (a RefusedError names each,
// with its pod and field) and writes the rest of the batch; GPU model
// names are cut at record construction instead (PodRecord, NodeRecord;
// tracefmt.MaxGPUModel). docs/site-leader.md describes the formats, the
// retention, the refusals and what the export infers.
//
// Concurrency and lifetimes: a Store is safe for concurrent use and is
// closed by its owner after every user stopped; Recorder.Run owns the
// informers and a writer goroutine and returns after they stopped, having
// written what was queued. ObserveFlows may be called from any goroutine.
package trace
