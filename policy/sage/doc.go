// Package sage computes GraphSAGE embeddings of a service call graph
// (issue 19): the graph (Graph: services with replicas, requests and a
// placement summary, calls with rates), the encoder's node inputs
// (Inputs), its sampled neighbourhoods (Aggregators: weighted by call
// rate, drawn from a seed and each service's name, so two programs that
// list the same graph in another order compute the same embeddings), the
// encoder (Encoder: an nn.Sage with its fan-outs and seed; Embed), and its
// pre-training on link prediction of call edges (Pretrain, LinkAUC).
//
// The network itself (weights, forward and backward passes) is
// policy/nn's Sage; this package prepares its inputs and trains it.
//
// Concurrency and lifetimes: a Graph is read-only once validated and may
// be shared. Embed and LinkAUC run a private copy of the encoder's
// network, so one Encoder may serve concurrent calls (Default's is shared
// by every caller); changing its weights while they run is a race.
// Pretrain owns the encoder it returns.
package sage
