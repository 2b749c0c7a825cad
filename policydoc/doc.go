// Package policydoc is the scheduling-policy document of edgesched: the
// versioned, strictly decoded format (apiVersion edgesched.policy/v1) that
// the operator writes or that the natural-language compiler
// (policydoc/nlp) produces, and that the kube-scheduler plugin, the HTTP
// extender, edgectl and the simulator all read. It lives in its own
// package because no one of those owns it.
//
// A Document holds rules. A rule is either required (a hard constraint:
// the scheduler's Filter refuses every node that breaks it) or preferred (a
// soft preference with a weight in [1, 100]). Rules select the pods they
// apply to (by service, or every GPU pod, or every pod) and restrict or
// rank nodes by: co-location of services on a node or in a zone, keeping
// services apart, spreading a service's replicas (at most N per node or
// zone), zones, node labels, CPU architecture, GPU model, the grid's carbon
// intensity, the time of day, and a cap on requested CPU. Any rule may be
// limited to hours of the day (UTC).
//
// Scores: Evaluate turns the preferred rules into one adjustment in
// [0, MaxNodeScore]; the caller mixes it with its own score as
// (1-share)·base + share·adjustment, share = ScoreShare/100, so a policy
// never pushes a score out of [0, MaxNodeScore] and a document with no
// preferred rule leaves scores untouched (see Document.Combine).
//
// Decoding (Decode) is strict: the size is capped (MaxDocumentBytes),
// unknown fields are refused, and Validate names the field of every error
// (rules[2].maxCarbon: ...). The decoder is fuzzed (FuzzDecode).
//
// Concurrency and lifetimes: a Document is a plain value. After Validate it
// is never modified by this package, and a *Document that is shared between
// goroutines (the plugin swaps a pointer atomically on ConfigMap updates)
// must be treated as read-only by everyone. Evaluate keeps no state; the
// View it reads is built by the caller for one scheduling decision.
package policydoc
