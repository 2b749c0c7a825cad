package depgraph

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgesched/edgesched/internal/kube/kubeclientset"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/sage"
)

// TestPublisherEmbeddings follows a leader with an encoder: the
// first write carries the graph's service embeddings (the encoder's own
// computation, quantized); an unchanged graph leaves them; a new encoder,
// damaged embeddings, embeddings of another write of the graph or a
// leader without an encoder rewrite them.
func TestPublisherEmbeddings(t *testing.T) {
	ctx := context.Background()
	edges := fixedEdges{edge("web", "db", 10), edge("web", "cache", 40), edge("cache", "db", 4)}
	client := fake.NewClientset()
	cms := client.CoreV1().ConfigMaps(kubefmt.DefaultNamespace)
	encoder := func(seed uint64) *sage.Encoder {
		cfg := sage.DefaultPretrainConfig()
		cfg.Seed = seed
		e, err := sage.Untrained(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	reg := prometheus.NewPedanticRegistry()
	publisher := func(enc *sage.Encoder, reg prometheus.Registerer) *Publisher {
		cfg := DefaultConfig()
		cfg.Client, cfg.Trace, cfg.Encoder, cfg.Registerer = kubeclientset.Wrap(client), edges, enc, reg
		cfg.Now = func() time.Time { return depT0 }
		p, err := NewPublisher(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	read := func() (map[string]string, *kubefmt.Embeddings) {
		cm, err := cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := cm.Data[kubefmt.EmbeddingsConfigMapKey]
		if !ok {
			return cm.Data, nil
		}
		m, err := kubefmt.DecodeEmbeddings([]byte(raw))
		if err != nil {
			t.Fatalf("the ConfigMap's embeddings: %v", err)
		}
		return cm.Data, m
	}
	sync := func(p *Publisher, action, reason string) {
		t.Helper()
		res, err := p.Sync(ctx)
		if err != nil || res.Action != action || res.Reason != reason {
			t.Fatalf("Sync = %+v, %v; want %s (%s)", res, err, action, reason)
		}
	}

	enc := encoder(1)
	p := publisher(enc, reg)
	sync(p, Created, "new")
	_, m := read()
	if m == nil || m.Encoder != enc.ID() || m.Dim != enc.Net.D || len(m.Services) != 3 || !m.Updated.Equal(depT0) {
		t.Fatalf("embeddings %+v", m)
	}
	want, err := enc.Embed(sage.FromDependencies(edges))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Services {
		for j, v := range s.Vector() {
			if math.Abs(float64(v-want.Of(s.Name)[j])) > float64(s.Scale)/2*1.0001 {
				t.Fatalf("%s value %d: %v published, %v computed", s.Name, j, v, want.Of(s.Name)[j])
			}
		}
	}
	if n := testutil.CollectAndCount(reg, "edgesched_site_embedding_seconds"); n != 1 {
		t.Fatalf("embedding_seconds: %d series", n)
	}

	sync(p, Unchanged, "")
	sync(publisher(encoder(2), nil), Updated, "encoder changed")
	if _, m := read(); m.Encoder != encoder(2).ID() {
		t.Fatalf("encoder %s after the change", m.Encoder)
	}
	cm, _ := cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
	cm.Data[kubefmt.EmbeddingsConfigMapKey] = `{"version":1}`
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync(p, Updated, "invalid embeddings")
	// embeddings from another write of the graph (an agent without them
	// rewrote the graph during an upgrade and kept the key): stale
	_, m = read()
	m.Updated = m.Updated.Add(-time.Minute)
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cm, _ = cms.Get(ctx, kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
	cm.Data[kubefmt.EmbeddingsConfigMapKey] = string(raw)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync(p, Updated, "embeddings stale")
	sync(p, Unchanged, "")
	sync(publisher(nil, nil), Updated, "no encoder")
	if data, m := read(); m != nil || data[kubefmt.DependenciesConfigMapKey] == "" {
		t.Fatalf("without an encoder: %v", data)
	}
	sync(publisher(nil, nil), Unchanged, "")
	sync(p, Updated, "no embeddings")

	// a leader with the decoder too publishes partners (format version
	// 2), the same as sage.Publish computes for the graph (what the
	// simulator's Annotate runs); one without it goes back to version 1
	pre, err := sage.Default()
	if err != nil {
		t.Fatal(err)
	}
	withDecoder := func() *Publisher {
		pd := publisher(pre.Encoder, nil)
		if err := pd.SetWeights(pre.Weights()); err != nil {
			t.Fatal(err)
		}
		return pd
	}
	sync(withDecoder(), Updated, "encoder changed")
	sync(withDecoder(), Unchanged, "")
	_, m = read()
	ref, err := sage.Publish(pre.Encoder, pre.Decoder, pre.ID(), sage.FromDependencies(edges), depT0)
	if err != nil {
		t.Fatal(err)
	}
	var partners int
	for _, s := range m.Services {
		partners += len(s.Partners)
		i := slices.IndexFunc(ref.Services, func(r kubefmt.ServiceEmbedding) bool { return r.Name == s.Name })
		if i < 0 || !slices.Equal(s.Partners, ref.Services[i].Partners) {
			t.Fatalf("%s: partners %v published, computed %+v", s.Name, s.Partners, ref.Services)
		}
	}
	// three services all within two calls of each other: two partners each
	if m.Version != 2 || partners != 6 {
		t.Fatalf("version %d, %d partners; want 2, 6", m.Version, partners)
	}
	// (the pair's ID covers the decoder: the encoder alone is another)
	sync(publisher(pre.Encoder, nil), Updated, "encoder changed")
	if _, m := read(); m.Version != 1 || len(m.Services[0].Partners) != 0 {
		t.Fatalf("without a decoder: version %d, %v", m.Version, m.Services[0].Partners)
	}

	// the site installs a model that carries GraphSAGE weights of its own
	// (a federated round trained them): the leader embeds with those,
	// under their ID, and goes back to its own encoder without them
	own := pre.Weights()
	own.Decoder[0] += 0.5
	pm := publisher(pre.Encoder, nil)
	if err := pm.SetWeights(own); err != nil {
		t.Fatal(err)
	}
	sync(pm, Updated, "encoder changed")
	if _, m := read(); m.Encoder != own.ID() || m.Version != 2 || m.Encoder == pre.ID() {
		t.Fatalf("with the model's weights: encoder %s version %d, want %s version 2", m.Encoder, m.Version, own.ID())
	}
	sync(pm, Unchanged, "")
	if err := pm.SetWeights(nil); err != nil {
		t.Fatal(err)
	}
	sync(pm, Updated, "encoder changed")
	if _, m := read(); m.Encoder != pre.Encoder.ID() || m.Version != 1 {
		t.Fatalf("back to the configured encoder: %s version %d, want %s version 1", m.Encoder, m.Version, pre.Encoder.ID())
	}
	bad := pre.Weights()
	bad.Params = bad.Params[:1]
	if err := pm.SetWeights(bad); err == nil || !strings.Contains(err.Error(), "parameters") {
		t.Fatalf("weights of the wrong shape: %v, want an error naming the parameters", err)
	}
	// embeddings off: the model's weights change nothing
	if err := publisher(nil, nil).SetWeights(own); err != nil {
		t.Fatal(err)
	}
}

// TestPublisherRunReweighs: Run publishes the partners of new
// GraphSAGE weights as soon as SetWeights switches to them, not an
// Interval later (an hour here, so only the wake-up can do it); setting
// the same weights again writes nothing.
func TestPublisherRunReweighs(t *testing.T) {
	pre, err := sage.Default()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	cfg := DefaultConfig()
	cfg.Client, cfg.Trace, cfg.Encoder, cfg.Decoder = kubeclientset.Wrap(client), fixedEdges{edge("web", "db", 10)}, pre.Encoder, pre.Decoder
	cfg.Now, cfg.Interval = func() time.Time { return depT0 }, time.Hour
	p, err := NewPublisher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	encoder := func() string {
		cm, err := client.CoreV1().ConfigMaps(kubefmt.DefaultNamespace).Get(context.Background(), kubefmt.DefaultDependenciesConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		m, err := kubefmt.DecodeEmbeddings([]byte(cm.Data[kubefmt.EmbeddingsConfigMapKey]))
		if err != nil {
			return err.Error()
		}
		return m.Encoder
	}
	stop := fltest.RunBackground(t, p.Run)
	defer stop()
	fltest.Eventually(t, 5*time.Second, "the first embeddings", func() (bool, string) { e := encoder(); return e == pre.ID(), e })
	own := pre.Weights()
	own.Decoder[0] += 0.5
	if err := p.SetWeights(own); err != nil {
		t.Fatal(err)
	}
	fltest.Eventually(t, 5*time.Second, "the model's weights' embeddings", func() (bool, string) { e := encoder(); return e == own.ID(), e })
	stop()
	// with Run stopped, the wake-ups wait in the channel: none for the
	// same weights, one (not two) for two switches
	for _, c := range []struct {
		name string
		w    *policy.SageWeights
		want int
	}{{"the same weights", own, 0}, {"back to the configured ones", nil, 1}, {"the model's again", own, 1}} {
		if err := p.SetWeights(c.w); err != nil {
			t.Fatal(err)
		}
		if got := len(p.reweighed); got != c.want {
			t.Errorf("%s: %d wake-ups pending, want %d", c.name, got, c.want)
		}
	}
}
