package depgraph

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
)

// ErrConfig wraps configuration refusals.
var ErrConfig = errors.New("depgraph: bad config")

// The service dependency graph the site leader publishes for the
// scheduler plugin (docs/site-leader.md, "Service dependency graph").
const (
	// RefreshIntervals: an unchanged graph is rewritten once the one in
	// the ConfigMap is this many intervals old (less half of one, so
	// timer jitter does not push it to the next), so its updated time
	// says the leader is alive.
	RefreshIntervals = 10
	// RateTolerance: a graph with the same edges is rewritten only when
	// some rate moved by more than this share of the rate in the
	// ConfigMap.
	RateTolerance = 0.1

	componentDependencies = "dependency-graph"
	labelManagedBy        = "app.kubernetes.io/managed-by"
	managedByAgent        = "edge-agent"
)

// Results of Publisher.Sync (the writes_total label values but for
// failed and trace_error).
const (
	// Created: the ConfigMap did not exist and was created.
	Created = "created"
	// Updated: the graph changed (or grew old) and was written.
	Updated = "updated"
	// Replaced: the ConfigMap held something that is not a valid graph;
	// it was overwritten (and logged).
	Replaced = "replaced"
	// Unchanged: the ConfigMap's graph is current; no write.
	Unchanged = "unchanged"

	resultFailed     = "failed"
	resultTraceError = "trace_error"
)

// Source computes the service call graph over the window
// ending at until (trace.Store.ServiceDependencies).
type Source interface {
	ServiceDependencies(window time.Duration, until time.Time) ([]kubefmt.DependencyEdge, error)
}

var _ Source = (*trace.Store)(nil)

// Config configures a Publisher. Start from
// DefaultConfig; the zero values of the optional fields are
// documented on each.
type Config struct {
	// Client reads and writes the ConfigMap (get/create/update on it):
	// kube.NewForConfig's clients, or a clientset adapted by
	// kube/kubeclientset. Required.
	Client kube.Interface
	// Namespace and Name locate the ConfigMap: what EdgePolicy's
	// dependenciesConfigMap arg (namespace/name) says (defaults
	// edgesched-system, kubefmt.DefaultDependenciesConfigMapName).
	Namespace, Name string
	// Trace computes the graph: the site trace (*trace.Store). Required.
	Trace Source
	// Interval is how often the graph is computed (default 1m); Window
	// the span of call-rate samples each computation averages over
	// (default 10m).
	Interval, Window time.Duration
	// BackoffMin and BackoffMax pace the retries of a failed computation
	// or write (defaults 1s, 30s; jittered from Seed).
	BackoffMin, BackoffMax time.Duration
	// Site labels the ConfigMap edgesched.io/site ("" : no such label);
	// Identity (the node name) annotates it as the writer ("": none).
	Site, Identity string
	// Now is the clock of the window and of the graph's updated time
	// (nil: time.Now).
	Now func() time.Time
	// Seed seeds the retry jitter.
	Seed uint64
	// Encoder, when set, embeds the graph's services (GraphSAGE,
	// policy/sage) every time the graph is written, into the same
	// ConfigMap (kubefmt.EmbeddingsConfigMapKey); the graph's size bound
	// shrinks by kubefmt.MaxEmbeddingsBytes to leave them room. nil: the
	// graph alone (and embeddings a previous leader wrote are removed).
	// Sync embeds with a private copy of its network; do not change its
	// weights while Sync runs.
	Encoder *sage.Encoder
	// Decoder, with Encoder, is the link-prediction decoder trained with
	// it: every service's partners (the services within two calls and
	// the predicted probability that the two call each other, what the
	// policy's dep_affinity feature reads) are published with the
	// embeddings. nil: embeddings alone.
	Decoder *sage.Decoder
	// Registerer receives edgesched_site_dependency_graph_writes_total
	// {result}, edgesched_site_dependency_graph_edges and
	// edgesched_site_embedding_seconds (nil: not registered).
	Registerer prometheus.Registerer
	// Logger (nil: discard).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Namespace: kubefmt.DefaultNamespace, Name: kubefmt.DefaultDependenciesConfigMapName,
		Interval: time.Minute, Window: 10 * time.Minute, BackoffMin: time.Second, BackoffMax: 30 * time.Second}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: dependency graph Client required", ErrConfig)
	case c.Trace == nil:
		return fmt.Errorf("%w: dependency graph Trace required (the site trace)", ErrConfig)
	case len(validation.IsDNS1123Label(c.Namespace)) > 0:
		return fmt.Errorf("%w: dependency graph Namespace %q is not a DNS label", ErrConfig, c.Namespace)
	case len(validation.IsDNS1123Subdomain(c.Name)) > 0:
		return fmt.Errorf("%w: dependency graph Name %q is not a ConfigMap name", ErrConfig, c.Name)
	case c.Interval <= 0:
		return fmt.Errorf("%w: dependency graph Interval %v must be positive", ErrConfig, c.Interval)
	case c.Window <= 0:
		return fmt.Errorf("%w: dependency graph Window %v must be positive", ErrConfig, c.Window)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("%w: dependency graph backoff %v to %v: want 0 < BackoffMin <= BackoffMax", ErrConfig, c.BackoffMin, c.BackoffMax)
	case c.Site != "" && len(validation.IsValidLabelValue(c.Site)) > 0:
		return fmt.Errorf("%w: dependency graph Site %q is not a label value", ErrConfig, c.Site)
	}
	return nil
}

// Publisher is the leader-only component that computes the
// site's service dependency graph from the trace every Interval and
// writes it into the ConfigMap EdgePolicy reads (data
// kubefmt.DependenciesConfigMapKey, kubefmt.DependencyGraph's
// encoding). It writes only when the graph changed (another edge set, or
// a rate that moved by more than RateTolerance) or the graph
// there is RefreshIntervals old, with optimistic concurrency
// (resourceVersion); a ConfigMap that does not hold a valid graph is
// replaced. Failures are logged, counted and retried with backoff; Run
// returns only when its context ends. Run once per term (reusable across
// terms); Sync is safe for concurrent use.
type Publisher struct {
	cfg    Config
	log    *slog.Logger
	writes *prometheus.CounterVec
	edges  prometheus.Gauge
	embed  prometheus.Histogram
	// weights are what the services are embedded with (cfg.Encoder and
	// cfg.Decoder, then SetWeights'; nil without an encoder); graphBudget
	// the bytes the graph's edges may take.
	weights     atomic.Pointer[embedder]
	graphBudget int
	// lastDropped is the previous interval's count of edges left out
	// (warned about when it changes).
	lastDropped atomic.Int64
	// reweighed wakes Run when SetWeights switches the weights, so the new
	// partners are published at once rather than an Interval later
	// (buffered 1: a wake-up pending is enough).
	reweighed chan struct{}
}

// embedder is an encoder, its decoder (nil: none) and their ID.
type embedder struct {
	enc *sage.Encoder
	dec *sage.Decoder
	id  string
}

// SetWeights makes the publisher embed with w from its next write on:
// the GraphSAGE weights of the model the site runs (quant.Artifact.Sage),
// so the partners it publishes are the ones that model reads; the
// embeddings in the ConfigMap are rewritten ("encoder changed"), at once
// when Run is running (it does not wait for the next Interval: a
// scheduler that has loaded the model reads a dep_affinity of 0 until
// then). Without an encoder configured (embeddings off) it does nothing;
// nil w goes back to cfg's encoder. Safe while Sync runs.
func (p *Publisher) SetWeights(w *policy.SageWeights) error {
	if p.cfg.Encoder == nil {
		return nil
	}
	next := &embedder{enc: p.cfg.Encoder, dec: p.cfg.Decoder}
	if w != nil {
		pre, err := sage.FromWeights(w)
		if err != nil {
			return fmt.Errorf("embed with the model's GraphSAGE weights: %w", err)
		}
		next.enc, next.dec = pre.Encoder, pre.Decoder
	}
	next.id = (&sage.Pretrained{Encoder: next.enc, Decoder: next.dec}).ID()
	if old := p.weights.Swap(next); old == nil || old.id != next.id {
		p.log.Info("service embeddings: GraphSAGE weights", "encoder", next.id)
		select {
		case p.reweighed <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	return nil
}

// NewPublisher checks cfg and registers the metrics.
func NewPublisher(cfg Config) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Publisher{cfg: cfg, log: log.With("configmap", cfg.Namespace+"/"+cfg.Name),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "site", Name: "dependency_graph_writes_total",
			Help: "Computations of the service dependency graph by result: created, updated, replaced (the ConfigMap held no valid graph), unchanged (no write needed), failed (API error; retried), trace_error (the site trace could not be read; retried)."},
			[]string{"result"}),
		edges: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "edgesched", Subsystem: "site", Name: "dependency_graph_edges",
			Help: "Edges (service -> service) of the dependency graph the site leader last wrote or found current in the ConfigMap."}),
		embed: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "edgesched", Subsystem: "site", Name: "embedding_seconds",
			Help:    "Time to compute the service embeddings (GraphSAGE) of the dependency graph, per write.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
		// the graph's fields besides its edges take under 200 bytes
		graphBudget: kubefmt.MaxDependencyGraphBytes - 1024,
		reweighed:   make(chan struct{}, 1),
	}
	if cfg.Encoder != nil {
		p.weights.Store(&embedder{enc: cfg.Encoder, dec: cfg.Decoder, id: (&sage.Pretrained{Encoder: cfg.Encoder, Decoder: cfg.Decoder}).ID()})
		p.graphBudget -= kubefmt.MaxEmbeddingsBytes
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.writes, p.edges, p.embed} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register dependency graph metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Run publishes the graph now, every Interval and when SetWeights
// switches the weights, until ctx ends (then it returns ctx's error); a
// failed attempt is retried after a capped, jittered backoff instead of
// the next Interval.
func (p *Publisher) Run(ctx context.Context) error {
	b := backoff.New(p.cfg.BackoffMin, p.cfg.BackoffMax, p.cfg.Seed^0xde9)
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		res, err := p.Sync(ctx)
		var again <-chan time.Time
		switch {
		case err != nil && ctx.Err() == nil:
			d := b.Next()
			p.log.Warn("dependency graph not published; retrying", "in", d, "err", err)
			again = time.After(d)
		case err == nil:
			b.Reset()
			if res.Action == Unchanged {
				p.log.Debug("dependency graph unchanged", "edges", res.Edges)
			} else {
				p.log.Info("dependency graph written", "action", res.Action, "edges", res.Edges, "reason", res.Reason, "dropped", res.Dropped)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-again:
		case <-p.reweighed:
		}
	}
}

// Result says what Sync did.
type Result struct {
	// Action is Created, Updated, Replaced
	// or Unchanged.
	Action string
	// Reason names why a graph was written ("new", "edges changed",
	// "rates moved", "refresh", "window changed", "no graph", "invalid";
	// for the embeddings of a current graph "no embeddings", "invalid
	// embeddings", "encoder changed", "partners changed", "embeddings
	// stale", "no encoder").
	Reason string
	// Edges in the graph; Dropped edges left out (a service name the
	// format refuses, or beyond the format's bounds: the lightest go).
	Edges, Dropped int
}

// Sync computes the graph over the Window ending now and writes it into
// the ConfigMap when it differs from the one there (see
// Publisher), creating the ConfigMap when absent. Conflicting
// writes are retried from a fresh read.
func (p *Publisher) Sync(ctx context.Context) (Result, error) {
	var res Result
	now := p.cfg.Now()
	edges, err := p.cfg.Trace.ServiceDependencies(p.cfg.Window, now)
	if err != nil {
		p.writes.WithLabelValues(resultTraceError).Inc()
		return res, fmt.Errorf("compute the dependency graph: %w", err)
	}
	edges, res.Dropped = p.fit(edges)
	if int64(res.Dropped) != p.lastDropped.Swap(int64(res.Dropped)) && res.Dropped > 0 {
		// once per change, not every interval (the details at debug level)
		p.log.Warn("dependency edges left out of the graph (refused names, or the graph's size bounds)", "dropped", res.Dropped, "kept", len(edges))
	}
	g := kubefmt.DependencyGraph{Version: kubefmt.DependencyGraphVersion, Updated: now.UTC().Truncate(time.Second),
		Window: p.cfg.Window.String(), Edges: edges}
	raw, err := g.Encode()
	if err != nil { // fit keeps the graph within the format's bounds
		p.writes.WithLabelValues(resultFailed).Inc()
		return res, fmt.Errorf("encode the dependency graph: %w", err)
	}
	res.Edges = len(edges)
	w := p.weights.Load() // one set of weights for this write
	// computed when the graph is written (it depends on nothing else)
	var emb []byte
	embeddings := func() ([]byte, error) {
		if w == nil || emb != nil {
			return emb, nil
		}
		start := time.Now()
		sg := sage.FromDependencies(edges)
		var err error
		if len(sg.Services) == 0 {
			m := &kubefmt.Embeddings{Version: 1, Encoder: w.id, Updated: g.Updated, Dim: w.enc.Net.D}
			if w.dec != nil {
				m.Version = kubefmt.EmbeddingsVersion
			}
			emb, err = m.Encode()
		} else {
			var m *kubefmt.Embeddings
			if m, err = sage.Publish(w.enc, w.dec, w.id, sg, g.Updated); err == nil {
				emb, err = m.Encode()
			}
		}
		p.embed.Observe(time.Since(start).Seconds())
		if err != nil {
			// the graph is what the scheduler needs: write it without
			// embeddings rather than not at all
			p.log.Warn("service embeddings not computed: writing the graph without them", "err", err)
			emb = nil
		}
		return emb, nil
	}
	cms := p.cfg.Client.ConfigMaps(p.cfg.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, p.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.cfg.Name, Namespace: p.cfg.Namespace}}
			e, err := embeddings()
			if err != nil {
				return err
			}
			p.stamp(cm, raw, e)
			res.Action, res.Reason = Created, "new"
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(v1.Resource("configmaps"), p.cfg.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		res.Action = Updated
		if cur, ok := cm.Data[kubefmt.DependenciesConfigMapKey]; !ok {
			res.Reason = "no graph"
		} else if old, derr := kubefmt.DecodeDependencyGraph([]byte(cur)); derr != nil {
			p.log.Warn("the ConfigMap's dependency graph does not decode: replacing it", "err", derr)
			res.Action, res.Reason = Replaced, "invalid"
		} else if res.Reason = p.changed(old, &g, now); res.Reason == "" {
			if res.Reason = p.embeddingsStale(cm, old.Updated, w); res.Reason == "" {
				res.Action = Unchanged
				return nil
			}
		}
		e, err := embeddings()
		if err != nil {
			return err
		}
		cm = cm.DeepCopy()
		p.stamp(cm, raw, e)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		p.writes.WithLabelValues(resultFailed).Inc()
		return res, fmt.Errorf("write %s/%s: %w", p.cfg.Namespace, p.cfg.Name, err)
	}
	p.writes.WithLabelValues(res.Action).Inc()
	p.edges.Set(float64(res.Edges))
	return res, nil
}

// embeddingsStale says why the ConfigMap's embeddings must be rewritten
// although its graph (written at graphUpdated) is current ("" when they
// need not): missing, invalid, from another encoder, or not written with
// that graph (an agent without embeddings, during a rolling upgrade,
// rewrote the graph and kept the old key), or of the other format
// version (with partners when the leader has no decoder, without them
// when it has one); or present when the leader has no encoder.
func (p *Publisher) embeddingsStale(cm *v1.ConfigMap, graphUpdated time.Time, w *embedder) string {
	cur, ok := cm.Data[kubefmt.EmbeddingsConfigMapKey]
	switch {
	case w == nil && ok:
		return "no encoder"
	case w == nil:
		return ""
	case !ok:
		return "no embeddings"
	}
	m, err := kubefmt.DecodeEmbeddings([]byte(cur))
	switch {
	case err != nil:
		p.log.Warn("the ConfigMap's service embeddings do not decode: replacing them", "err", err)
		return "invalid embeddings"
	case m.Encoder != w.id:
		return "encoder changed"
	case (w.dec != nil) != (m.Version >= 2):
		// a leader of another release: partners missing or not ours
		return "partners changed"
	case !m.Updated.Equal(graphUpdated):
		return "embeddings stale"
	}
	return ""
}

// changed says why g must replace old ("" when it need not): another
// edge set, a rate that moved by more than RateTolerance,
// another window, or old's updated time RefreshIntervals
// intervals ago (or in the future: another leader's clock).
func (p *Publisher) changed(old, g *kubefmt.DependencyGraph, now time.Time) string {
	if old.Window != g.Window {
		return "window changed"
	}
	if len(old.Edges) != len(g.Edges) {
		return "edges changed"
	}
	rates := make(map[[2]string]float64, len(old.Edges))
	for _, e := range old.Edges {
		rates[[2]string{e.From, e.To}] = e.CallsPerSecond
	}
	moved := false
	for _, e := range g.Edges {
		r, ok := rates[[2]string{e.From, e.To}]
		if !ok {
			return "edges changed"
		}
		moved = moved || math.Abs(e.CallsPerSecond-r) > RateTolerance*r
	}
	if moved {
		return "rates moved"
	}
	refresh := time.Duration((RefreshIntervals - 0.5) * float64(p.cfg.Interval))
	if age := now.Sub(old.Updated); age >= refresh || age < -p.cfg.Interval {
		return "refresh"
	}
	return ""
}

// fit drops the edges a graph cannot hold: those naming a service the
// format refuses and, beyond kubefmt.MaxDependencyEdges or
// MaxDependencyGraphBytes encoded, the lightest ones (the heaviest are
// kept). It returns the edges kept and how many were dropped.
func (p *Publisher) fit(edges []kubefmt.DependencyEdge) ([]kubefmt.DependencyEdge, int) {
	kept := make([]kubefmt.DependencyEdge, 0, len(edges))
	bad := 0
	for _, e := range edges {
		one := kubefmt.DependencyGraph{Version: kubefmt.DependencyGraphVersion, Edges: []kubefmt.DependencyEdge{e}}
		if err := one.Validate(); err != nil {
			if bad == 0 {
				p.log.Debug("dependency edge left out of the graph", "err", err)
			}
			bad++
			continue
		}
		kept = append(kept, e)
	}
	budget := p.graphBudget
	size := 0
	sizes := make([]int, len(kept))
	for i, e := range kept {
		b, _ := json.Marshal(e) // strings and a finite float: cannot fail
		sizes[i] = len(b) + 1
		size += sizes[i]
	}
	if len(kept) <= kubefmt.MaxDependencyEdges && size <= budget {
		return kept, bad
	}
	order := make([]int, len(kept))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(kept[b].CallsPerSecond, kept[a].CallsPerSecond) })
	var out []kubefmt.DependencyEdge
	size = 0
	for _, i := range order {
		if len(out) == kubefmt.MaxDependencyEdges || size+sizes[i] > budget {
			break
		}
		out = append(out, kept[i])
		size += sizes[i]
	}
	dropped := bad + len(kept) - len(out)
	p.log.Debug("dependency graph too large: the lightest edges left out", "edges", len(kept), "kept", len(out),
		"maxEdges", kubefmt.MaxDependencyEdges, "maxBytes", kubefmt.MaxDependencyGraphBytes)
	return out, dropped
}

// stamp puts the graph, the embeddings (nil: none), the labels and the
// writer on cm.
func (p *Publisher) stamp(cm *v1.ConfigMap, raw, emb []byte) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[kubefmt.DependenciesConfigMapKey] = string(raw)
	delete(cm.BinaryData, kubefmt.DependenciesConfigMapKey) // one copy, where the plugin reads it
	delete(cm.BinaryData, kubefmt.EmbeddingsConfigMapKey)
	if emb != nil {
		cm.Data[kubefmt.EmbeddingsConfigMapKey] = string(emb)
	} else {
		delete(cm.Data, kubefmt.EmbeddingsConfigMapKey)
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[labelManagedBy] = managedByAgent
	cm.Labels[kubefmt.LabelComponent] = componentDependencies
	if p.cfg.Site != "" {
		cm.Labels[kubefmt.LabelSite] = p.cfg.Site
	}
	if p.cfg.Identity != "" {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[kubefmt.AnnotationAgent] = p.cfg.Identity
	}
}
