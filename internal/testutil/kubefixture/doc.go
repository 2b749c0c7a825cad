// Package kubefixture holds the Pods and the Node that the scheduler
// plugin's and the agent trace recorder's tests both convert, to show
// that the two read a pod and a node alike (through kubefmt.SimPod and
// kubefmt.SimNode): GPU shares and whole devices, accepted GPU models,
// the QoS, CPU-usage and failure-rate annotations, init containers,
// overhead, priority, and a malformed GPU request.
//
// Every call builds new objects; callers may change them.
package kubefixture
