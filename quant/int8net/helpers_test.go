package int8net

import (
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// randomModel is modeltest.Random; benchRows is modeltest.Rows.
var (
	randomModel = modeltest.Random
	benchRows   = modeltest.Rows
)

// quantized calibrates m on n random candidate rows (benchRows(n, seed))
// with the default calibration and builds its integer scorer.
func quantized(t testing.TB, m *nn.Model, n int, seed uint64) (*quant.Artifact, *Net) {
	t.Helper()
	a, err := quant.Quantize(m.Float(), benchRows(n, seed), quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	return a, q
}
