// Package cluster holds the edgectl verbs for one site's cluster and its
// data: explain (why EdgePolicy placed a pod, from the cluster or a
// manifest), topology (a site's carbon zones and RTTs: check, the
// ConfigMap, one from a scenario) and trace (a site's recorded workload,
// exported as a scenario).
//
// Each constructor returns a new command with its own flags; explain pod
// talks to the API server only while it runs.
package cluster
