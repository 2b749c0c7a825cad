package sources

import (
	"bytes"
	"context"
	"sync/atomic"

	"github.com/edgesched/edgesched/policydoc"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Scheduling policy (docs/policy-language.md): with policyConfigMap set,
// the scheduler watches that ConfigMap (a Feed, as the dependency graph
// and the topology) for a policydoc document under policydoc.ConfigMapKey;
// package serving evaluates it. A document that does not decode is
// refused (counted, logged) and the last good one stays; a deleted
// ConfigMap or key clears the policy.

var (
	metricPolicyRules = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "policy_rules",
		Help:           "Rules of the scheduling policy in use (0 without one).",
		StabilityLevel: metrics.ALPHA,
	})
	metricPolicyUpdates     = newFeedUpdates("policy_updates_total", "Scheduling policy")
	policyMetricsRegistered atomic.Bool
)

// PolicyRules holds the policy in use; the zero value holds none. Safe
// for concurrent use; Install and Clear are called one at a time (Feed).
type PolicyRules struct {
	cur atomic.Pointer[policyInUse] // nil: none
}

type policyInUse struct {
	doc *policydoc.Document
	raw []byte
}

var _ FeedTarget = (*PolicyRules)(nil)

// Current is the document in use (nil: none).
func (r *PolicyRules) Current() *policydoc.Document {
	if r == nil {
		return nil
	}
	if c := r.cur.Load(); c != nil {
		return c.doc
	}
	return nil
}

// Install implements FeedTarget.
func (r *PolicyRules) Install(raw []byte) (bool, error) {
	d, err := policydoc.Decode(raw)
	if err != nil {
		return false, err
	}
	if c := r.cur.Load(); c != nil && bytes.Equal(c.raw, raw) {
		return false, nil
	}
	r.cur.Store(&policyInUse{doc: d, raw: bytes.Clone(raw)})
	metricPolicyRules.Set(float64(len(d.Rules)))
	return true, nil
}

// Set installs a document directly (tests, and a file in a later version).
func (r *PolicyRules) Set(d *policydoc.Document) {
	if d == nil {
		r.cur.Store(nil)
		return
	}
	r.cur.Store(&policyInUse{doc: d})
}

// Clear implements FeedTarget.
func (r *PolicyRules) Clear() bool {
	metricPolicyRules.Set(0)
	return r.cur.Swap(nil) != nil
}

// InUse implements FeedTarget.
func (r *PolicyRules) InUse() []any {
	d := r.Current()
	if d == nil {
		return []any{"rules", 0}
	}
	return []any{"rules", len(d.Rules)}
}

// StartPolicy watches namespace/name's policy into rules until ctx ends
// (Feed.start); the returned function blocks until the watch stopped.
func StartPolicy(ctx context.Context, client kubernetes.Interface, rules *PolicyRules, namespace, name string) (*Feed, func()) {
	RegisterPolicyMetrics()
	f := &Feed{what: "Scheduling policy", without: "no policy rules apply", key: policydoc.ConfigMapKey,
		target: rules, updates: metricPolicyUpdates, namespace: namespace, name: name,
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "policy", namespace+"/"+name)}
	return f, f.start(ctx, client)
}

// RegisterPolicyMetrics registers the policy feed's metrics (once; they
// are left out of the registry until a policy is watched).
func RegisterPolicyMetrics() {
	if policyMetricsRegistered.CompareAndSwap(false, true) {
		for _, m := range []metrics.Registerable{metricPolicyRules, metricPolicyUpdates} {
			_ = legacyregistry.Register(m)
		}
	}
}
