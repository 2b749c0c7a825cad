// Package policy will hold the learned scheduling policy: the versioned
// feature schema of (pod, node) pairs, the actor-critic network on
// gorgonia.org/tensor with a hand-written backward pass, PPO training in the
// simulator (package sim), and GraphSAGE embeddings of the service
// dependency graph.
//
// Nothing is implemented yet; see the project's open issues.
package policy
