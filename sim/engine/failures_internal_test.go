package engine

import (
	"testing"

	"github.com/edgesched/edgesched/sim"
)

func TestConstraintStrings(t *testing.T) {
	if got := selectorString(map[string]string{"zone": "z2", "site": "s1"}); got != "site=s1,zone=z2" {
		t.Errorf("selector = %q, want keys sorted", got)
	}
	ts := []sim.Toleration{
		{Key: "gpu", Value: "t4", Effect: sim.EffectNoExecute},
		{Key: "edge", Exists: true, AnyEffect: true},
	}
	if got := tolerationsString(ts); got != "edge:exists,gpu=t4:NoExecute" {
		t.Errorf("tolerations = %q", got)
	}
	if selectorString(nil) != "" || tolerationsString(nil) != "" {
		t.Error("no constraints should print as empty strings")
	}
}
