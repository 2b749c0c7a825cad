package ppo

import (
	"context"
	"testing"

	"github.com/edgesched/edgesched/models"
)

// TestEvaluateRanksPolicies: on a held-out retail-fleet workload the
// shipped edge model (trained there) earns a higher return under the edge
// training reward than the kube-scheduler default scoring, and Evaluate
// of a model is deterministic.
func TestEvaluateRanksPolicies(t *testing.T) {
	cfg, err := LoadConfig("../../configs/train-edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.Load("edge")
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{101}
	ctx := context.Background()
	learned, err := Evaluate(ctx, cfg, m, "", seeds)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Evaluate(ctx, cfg, m, "", seeds)
	if err != nil || again.Return != learned.Return {
		t.Fatalf("not deterministic: %v vs %v (%v)", learned.Return, again.Return, err)
	}
	base, err := Evaluate(ctx, cfg, nil, "k8s-default", seeds)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("return: learned:edge %.2f, k8s-default %.2f; failures %.0f vs %.0f", learned.Return, base.Return, learned.Measures["pods_failed"], base.Measures["pods_failed"])
	if !(learned.Return > base.Return) {
		t.Fatalf("learned return %.2f not above k8s-default %.2f", learned.Return, base.Return)
	}
	if _, ok := learned.Measures["cross_zone_traffic"]; !ok {
		t.Fatalf("measures lack cross_zone_traffic: %v", learned.Measures)
	}
	if _, err := Evaluate(ctx, cfg, nil, "", seeds); err == nil {
		t.Fatal("no policy: want an error")
	}
	if _, err := Evaluate(ctx, cfg, m, "", nil); err == nil {
		t.Fatal("no seeds: want an error")
	}
}
