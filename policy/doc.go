// Package policy is the learned scheduling policy: the versioned feature
// schema of (pod, node) pairs (features.go, SchemaID), the actor-critic
// network (net.go), the model file format (model.go) and the policy as a
// simulator policy (Learned).
//
// The network is one scorer MLP applied to every feasible node's features,
// so a model works on any cluster size; the engine binds the best score
// (the actor's softmax over the scores is used in training, package
// policy/ppo). Models carry their schema, normalisation statistics
// included, and refuse to load into a build computing another schema.
//
// Concurrency and lifetimes: a Net keeps the activations of its last
// Forward for Backward and is not safe for concurrent use; Clone gives an
// independent copy. A Model is read-only once built and may be shared;
// NewLearned copies the network, so every run gets its own. An Extractor
// and a Learned belong to one run on one sim.Env.
//
// docs/policy.md documents the schema, the network and the file format.
package policy
