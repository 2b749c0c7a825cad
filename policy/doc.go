// Package policy is the learned scheduling policy as serving needs it: the
// versioned feature schema of (pod, node) pairs (features.go, SchemaID),
// feature extraction (Extractor), the decision rule (Decision), the
// network's layout (Layers, Shapes) and the policy as a simulator policy
// over any Scorer (Learned, NewLearnedScorer). It does not hold the
// trainable float network: that is package policy/nn (gorgonia.org/tensor,
// the .esm model file, the float scorer), which the int8 serving path does
// not need.
//
// The network is one scorer MLP applied to every feasible node's features,
// so a model works on any cluster size; the engine binds the best score
// (the actor's softmax over the scores is used in training, package
// policy/ppo). Models carry their schema, normalisation statistics
// included, and refuse to load into a build computing another schema.
//
// Concurrency and lifetimes: an Extractor and a Learned belong to one run
// on one sim.Env; a Scorer given to NewLearnedScorer is that run's own.
//
// docs/policy.md documents the schema, the network and the file format.
package policy
