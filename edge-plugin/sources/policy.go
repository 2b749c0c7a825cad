package sources

import (
	"bytes"
	"context"
	"sync"
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
	metricPolicyUpdates   = newFeedUpdates("policy_updates_total", "Scheduling policy")
	metricPolicyRejection = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      MetricsSubsystem,
		Name:           "policy_filter_rejections_total",
		Help:           "Nodes refused by a required rule of the scheduling policy, by rule (rules of the policy in use).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"rule"})
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
	forgetRejections(d)
	return true, nil
}

// CountPolicyRejection counts one node refused by rule
// (policy_filter_rejections_total).
func CountPolicyRejection(rule string) {
	// the series first: forgetRejections then either sees the rule or
	// deletes nothing this call made after it looked
	metricPolicyRejection.WithLabelValues(rule).Inc()
	countedRules.Store(rule, true)
}

// countedRules holds every rule with a rejection series (rule -> true).
var countedRules sync.Map

// forgetRejections deletes the rejection series of every rule cur (nil:
// none) does not have, so a policy edited over months keeps one series
// per rule in use, not one per rule it ever had. A Check still running on
// the document cur replaced may count one of its rules again: the next
// change deletes that one. The series are the process's: one policy per
// scheduler process (a second profile watching another policy would have
// its series deleted by this one's changes).
func forgetRejections(cur *policydoc.Document) {
	keep := map[string]bool{}
	if cur != nil {
		for _, r := range cur.Rules {
			keep[r.Name] = true
		}
	}
	countedRules.Range(func(k, _ any) bool {
		if rule := k.(string); !keep[rule] {
			countedRules.Delete(rule)
			metricPolicyRejection.Delete(map[string]string{"rule": rule}) // (DeleteLabelValues panics before registration)
		}
		return true
	})
}

// Set installs a document directly (tests, and a file in a later version).
func (r *PolicyRules) Set(d *policydoc.Document) {
	var next *policyInUse
	if d != nil {
		next = &policyInUse{doc: d}
	}
	r.cur.Store(next)
	forgetRejections(d)
}

// Clear implements FeedTarget.
func (r *PolicyRules) Clear() bool {
	metricPolicyRules.Set(0)
	old := r.cur.Swap(nil)
	forgetRejections(nil)
	return old != nil
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
		for _, m := range []metrics.Registerable{metricPolicyRules, metricPolicyUpdates, metricPolicyRejection} {
			_ = legacyregistry.Register(m)
		}
	}
}
