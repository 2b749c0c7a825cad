package quant

import (
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy/nn"
)

// randomModel is modeltest.Random.
var randomModel = modeltest.Random

// quantized calibrates m on n random candidate rows (benchRows(n, seed))
// with the default calibration and builds its integer scorer.
func quantized(t testing.TB, m *nn.Model, n int, seed uint64) (*Artifact, *Int8Net) {
	t.Helper()
	a, err := Quantize(m.Float(), benchRows(n, seed), DefaultCalibration(), Info{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewInt8Net(a)
	if err != nil {
		t.Fatal(err)
	}
	return a, q
}
