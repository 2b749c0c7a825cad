package sage

import (
	"testing"

	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// appGraph is a library app's call graph.
func appGraph(t testing.TB, name string) *Graph {
	t.Helper()
	src, err := apps.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	return parsedGraph(t, src, name)
}

// syntheticGraph is a generated app's call graph.
func syntheticGraph(t testing.TB, s apps.Spec) *Graph {
	t.Helper()
	src, err := apps.Synthetic(s)
	if err != nil {
		t.Fatal(err)
	}
	return parsedGraph(t, src, s.Name())
}

func parsedGraph(t testing.TB, src []byte, name string) *Graph {
	t.Helper()
	a, err := scenario.ParseApp(src, name)
	if err != nil {
		t.Fatal(err)
	}
	return FromApp(a)
}

// trainingApps are the library apps training may use (apps.HeldOut), in
// name order.
func trainingApps(t testing.TB) (names []string, graphs []*Graph) {
	for _, n := range apps.Names() {
		if !apps.HeldOut(n) {
			names, graphs = append(names, n), append(graphs, appGraph(t, n))
		}
	}
	return names, graphs
}
