// Package extender serves EdgePolicy's Filter and Score decisions over
// the kube-scheduler HTTP extender protocol, for K3s's embedded scheduler
// (`edge-scheduler extender`, whose command line is
// internal/schedcmd/extender.go): Start runs the server with an informer
// cluster source (InformerSource), New the handler over any ClusterSource.
// The bind verb binds GPU pods with the policy's devices in their
// annotation and checks the scheduling policy's required rules again.
//
// Concurrency and lifetime: an Extender is safe for concurrent requests;
// the pods it bound stay "assumed" on their nodes until its informers show
// them (at most AssumeTTL). A filter call for a GPU pod waits (at most
// Options.BindWait) for the pods filtered before it to be reserved at the
// bind verb. A Server lives until the context given to Start ends, then
// shuts down gracefully (Config.ShutdownTimeout) and stops its watches
// before Done closes.
package extender
