package cluster

// Hooks for the external tests (package cluster_test), which run
// edgectl's whole command tree and so cannot be in this package.

const AnnotationExplanation = annotationExplanation

type ExplainedPod = explainedPod
