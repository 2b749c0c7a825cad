// Package edgeplugin will hold EdgePolicy, the kube-scheduler framework
// plugin (PreFilter, Filter, PreScore, Score, NormalizeScore) that runs the
// int8 policy inside the scheduler; the model loader with signature checks
// and atomic hot swap; the node-telemetry reader; per-placement
// explanations; and the HTTP extender mode for K3s's embedded scheduler.
//
// Nothing is implemented yet; see the project's open issues.
package edgeplugin
