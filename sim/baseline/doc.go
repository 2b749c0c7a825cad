// Package baseline implements the published scheduling policies the
// learned policy is measured against, each faithful to its definition and
// documented with its formula:
//
//   - random-fit, best-fit, dot-product, gpu-packing, gpu-clustering and fgd
//     as evaluated in "Beware of Fragmentation" (Weng et al., USENIX
//     ATC'23), following the paper and its open-source artifact;
//   - k8s-default: kube-scheduler v1.37's default resource scoring,
//     NodeResourcesFit (LeastAllocated) + NodeResourcesBalancedAllocation;
//   - trimaran-tlp: scheduler-plugins' Trimaran TargetLoadPacking.
//
// Extras are references that are not in "all": fgd-pressure (policy v2's
// first teacher), fgd-strand (fgd-pressure less the GPU a placement
// strands for lack of CPU or memory: the default model's teacher),
// network-overhead (scheduler-plugins' network-aware profile),
// and edgesched's own dep-load (dependencies and measured load) and
// carbon-load (dep-load and the pod's marginal emission rate).
//
// All returns a factory per policy; Lookup resolves names and aliases. A
// policy value belongs to one run (FGD keeps a per-run cache).
package baseline
