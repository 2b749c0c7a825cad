// Package explain says why EdgePolicy chose a pod's node: every pod the
// plugin scored gets kubefmt.AnnotationExplanation at Bind, with the int8
// model's raw score on the chosen node, the score of a baseline node, and
// the exact Shapley values of the feature groups (FeatureGroups) that
// split the difference between the two.
//
// Game. The players are the G feature groups; the value of a coalition S is
// the int8 scorer's raw output on the chosen node's feature vector with the
// features of the groups outside S replaced by the baseline's. The baseline
// is the mean of the pod's scored candidate nodes' raw feature vectors (of
// explainBaselineNodes of them, evenly spaced in name order, when there are
// more; the annotation says how many: baselineNodes). The features are
// normalised affinely inside the scorer, so this is also the mean after
// normalisation. The explanation therefore answers "why this node rather
// than a typical candidate": pod features are equal on every candidate, so
// the pod group is a dummy player and gets exactly 0, and the attributions
// add up to score(node) - score(mean candidate) (efficiency). Zeros after
// normalisation would instead compare with the training set's average
// decision, which mixes in what the pod is and says less about the choice
// of node.
//
// Cost. Reserve extracts the chosen node's features and the baseline's
// from the cycle's view (PreScore itself keeps no features: most of its
// scores come from the serving core's score cache). All 2^G coalitions
// are then scored in Bind (the binding cycle, off the scheduling path) in
// one batch with a scorer of the model that scored the cycle (the same
// int8net.Scorer code, so the attributions explain what ran): 2^7 = 128
// forward passes for 7 groups (2^8 for the 8 of FeatureGroups), tens of
// microseconds.
//
// Concurrency: Capture runs under the serving core's lock (on the view of
// the cycle that scored the node); an Input is read-only once built and
// Explain may run on any goroutine (the model hands out its own scorer).
package explain
