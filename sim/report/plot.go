package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/edgesched/edgesched/sim/engine"
)

// Plot file names written by WritePlots.
const (
	UnallocatedPlot = "unallocated_gpu.png"
	UtilizationPlot = "utilization.png"
	// MeasuresPlot (replay) has one bar chart per measure that differs
	// between policies beyond utilisation: failures, latency, cross-zone
	// traffic, carbon.
	MeasuresPlot = "measures.png"
)

// measuresPlotted are MeasuresPlot's panels: the measure, its title and
// how a value is shown (a share as a percentage).
var measuresPlotted = []struct {
	name, title string
	percent     bool
}{
	{"failure_rate", "scheduling failures (% of pods)", true},
	{"latency_p95_ms", "p95 latency proxy (ms)", false},
	{"cross_zone_traffic", "cross-zone dependency traffic (% of call rate)", true},
	{"carbon_g", "carbon of placed work (gCO2)", false},
}

// WritePlots draws the comparison's PNG plots into dir and returns the
// files written: the unallocated-GPU curve (inflate mode on a cluster with
// GPUs) and utilisation over time or arrived demand.
func (d *Document) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	var files []string
	if d.Mode == engine.Inflate && d.Capacity.GPUMilli > 0 {
		leg := newLegend()
		full, zoom := d.curvePlot(leg), d.curvePlot(nil)
		path := filepath.Join(dir, UnallocatedPlot)
		if err := SaveGrid(path, 7*vg.Inch, 3.5*vg.Inch, 1, leg, full, zoom); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	path := filepath.Join(dir, UtilizationPlot)
	if err := d.saveUtilization(path); err != nil {
		return nil, err
	}
	files = append(files, path)
	if d.Mode == engine.Replay {
		path := filepath.Join(dir, MeasuresPlot)
		if err := d.saveMeasures(path); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

// meanXY averages, for one policy, a per-point value over seeds; runs share
// the same x grid (inflate steps or replay sample times).
func (d *Document) meanXY(policy string, points func(Run) plotter.XYs) plotter.XYs {
	var sum plotter.XYs
	var n int
	for _, r := range d.Runs {
		if r.Policy != policy {
			continue
		}
		xy := points(r)
		if sum == nil {
			sum = make(plotter.XYs, len(xy))
			copy(sum, xy)
			n = 1
			continue
		}
		for i := range min(len(sum), len(xy)) {
			sum[i].Y += xy[i].Y
		}
		sum = sum[:min(len(sum), len(xy))]
		n++
	}
	for i := range sum {
		sum[i].Y /= float64(n)
	}
	return sum
}

// Palette is Tableau 10 in an order that keeps neighbours apart (blue,
// orange, green, red, purple, brown, pink, grey, olive, cyan): policies
// get colours by their order, lines beyond ten also a dash pattern.
// Shared with the other plots of the project (the federated demo's).
var Palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// addLines draws one line per policy; with leg, it adds their entries.
func (d *Document) addLines(p *plot.Plot, leg *plot.Legend, points func(Run) plotter.XYs) {
	p.Add(plotter.NewGrid())
	for i, pol := range d.Policies() {
		xy := d.meanXY(pol, points)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			continue // NaN or Inf points: skip the line rather than fail
		}
		l.Color = Palette[i%len(Palette)]
		l.Dashes = plotutil.Dashes(i / len(Palette))
		l.Width = vg.Points(1.5)
		p.Add(l)
		if leg != nil {
			leg.Add(pol, l)
		}
	}
}

// newLegend is a legend for a strip beside the panels (outside the data).
func newLegend() *plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.ThumbnailWidth = vg.Points(24)
	return &l
}

// CleanTicks are gonum's default ticks labelled without trailing zeros
// ("75", "0.25" rather than "75.00", "0.25"), the same precision on
// every label.
type CleanTicks struct{}

var _ plot.Ticker = CleanTicks{}

// Ticks implements plot.Ticker.
func (CleanTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// HourTicks marks hours with integer labels at a step of 1, 2, 3, 4, 6,
// 12, 24 or 48 hours, the smallest that gives at most 12 labels; the
// minor ticks mark the hours between when they are few.
type HourTicks struct{}

var _ plot.Ticker = HourTicks{}

// Ticks implements plot.Ticker for an axis in hours.
func (HourTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	step := 48.0
	for _, s := range []float64{1, 2, 3, 4, 6, 12, 24, 48} {
		if span/s <= 12 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for h := math.Ceil(lo/step) * step; h <= hi+1e-9; h += step {
		ticks = append(ticks, plot.Tick{Value: h, Label: strconv.Itoa(int(math.Round(h)))})
	}
	if step > 1 && span <= 72 {
		for h := math.Ceil(lo); h <= hi+1e-9; h++ {
			if math.Mod(h, step) != 0 {
				ticks = append(ticks, plot.Tick{Value: h})
			}
		}
	}
	return ticks
}

// curvePlot is the unallocated-GPU curve; with leg (the full curve) the
// policies' entries go there, without it the panel is the detail above
// 80% arrived demand.
func (d *Document) curvePlot(leg *plot.Legend) *plot.Plot {
	zoom := leg == nil
	p := plot.New()
	seeds := fmt.Sprintf("mean of %d seeds", len(d.Seeds))
	if len(d.Seeds) == 1 {
		seeds = fmt.Sprintf("seed %d", d.Seeds[0])
	}
	p.Title.Text = fmt.Sprintf("%s: GPUs left unallocated (%s)", d.Scenario, seeds)
	p.X.Label.Text = "arrived GPU demand (% of cluster GPU capacity)"
	p.Y.Label.Text = "unallocated GPU (% of capacity)"
	p.X.Tick.Marker, p.Y.Tick.Marker = CleanTicks{}, CleanTicks{}
	d.addLines(p, leg, func(r Run) plotter.XYs {
		var xy plotter.XYs
		for _, c := range r.Curve {
			if !zoom || c.ArrivedShare >= 0.8-1e-9 {
				xy = append(xy, plotter.XY{X: 100 * c.ArrivedShare, Y: 100 * c.UnallocatedGPUShare})
			}
		}
		return xy
	})
	if zoom {
		p.Title.Text = "detail from 80% arrived demand"
		p.Y.Min = 0
	}
	return p
}

// SavePanels stacks plots vertically in one PNG.
func SavePanels(path string, w, h vg.Length, panels ...*plot.Plot) error {
	return SaveGrid(path, w, h, 1, nil, panels...)
}

// SaveGrid draws panels in a grid of cols columns, each w x h, into one
// PNG; with leg, a strip on the right holds the legend, outside the data.
// The file is written whole or not at all (writeFile).
func SaveGrid(path string, w, h vg.Length, cols int, leg *plot.Legend, panels ...*plot.Plot) error {
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		plots[i/cols][i%cols] = p
	}
	var legW vg.Length
	if leg != nil {
		legW = leg.Rectangle(draw.Canvas{}).Size().X + vg.Points(16)
	}
	img := vgimg.New(vg.Length(cols)*w+legW, vg.Length(rows)*h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(12), PadY: vg.Points(8), PadLeft: vg.Points(4)}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, -legW, 0, 0))
	for i := range plots {
		for j := range plots[i] {
			if plots[i][j] != nil {
				plots[i][j].Draw(canvases[i][j])
			}
		}
	}
	if leg != nil {
		leg.Draw(draw.Crop(dc, vg.Length(cols)*w+vg.Points(8), 0, 0, -vg.Points(24)))
	}
	return writeFile(path, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
}

func (d *Document) saveUtilization(path string) error {
	xLabel := "time (hours)"
	xOf := func(x float64) float64 { return x / 3600 }
	if d.Mode == engine.Inflate {
		xLabel = "arrived demand (% of capacity)"
		xOf = func(x float64) float64 { return 100 * x }
	}
	leg := newLegend()
	panel := func(title string, y func(engine.SeriesPoint) float64, legend bool) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xLabel
		p.Y.Label.Text = "% of capacity"
		p.Y.Min = 0
		p.Y.Tick.Marker = CleanTicks{}
		if d.Mode == engine.Replay {
			p.X.Tick.Marker = HourTicks{}
		}
		var l *plot.Legend
		if legend {
			l = leg
		}
		d.addLines(p, l, func(r Run) plotter.XYs {
			xy := make(plotter.XYs, len(r.Series))
			for i, s := range r.Series {
				xy[i].X, xy[i].Y = xOf(s.X), 100*y(s)
			}
			return xy
		})
		return p
	}
	panels := []*plot.Plot{
		panel(d.Scenario+": requested CPU", func(s engine.SeriesPoint) float64 { return s.AllocCPU }, true),
		panel("used CPU (requests x usage)", func(s engine.SeriesPoint) float64 { return s.UsedCPU }, false),
	}
	if d.Capacity.GPUMilli > 0 {
		panels = append(panels, panel("allocated GPU", func(s engine.SeriesPoint) float64 { return s.AllocGPU }, false))
	}
	return SaveGrid(path, 7*vg.Inch, 3*vg.Inch, 1, leg, panels...)
}

// saveMeasures draws one horizontal bar chart per measure of
// measuresPlotted (the mean over the policy's runs), bars in the
// policies' line colours, each labelled with its value.
func (d *Document) saveMeasures(path string) error {
	pols := d.Policies()
	var panels []*plot.Plot
	for _, m := range measuresPlotted {
		vals := make([]float64, len(pols))
		for i, pol := range pols {
			v, n := 0.0, 0
			for _, r := range d.Runs {
				if x, ok := r.Measures[m.name]; ok && r.Policy == pol && !math.IsNaN(x) {
					v, n = v+x, n+1
				}
			}
			if n > 0 {
				v /= float64(n)
			}
			if m.percent {
				v *= 100
			}
			vals[i] = v
		}
		label := valueLabel
		if m.percent {
			label = func(v float64) string { return fmt.Sprintf("%.2f%%", v) }
		}
		p, err := BarPanel(m.title, pols, vals, label)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	h := vg.Points(70 + 16*float64(len(pols)))
	return SaveGrid(path, 4.5*vg.Inch, h, 2, nil, panels...)
}

// BarPanel is a panel of horizontal bars, one per name from top to
// bottom in Palette's colours (the lines' colours of the same names),
// each labelled with label(value) at its end; negative values grow to the
// left of 0. The axis leaves room for the labels.
func BarPanel(title string, names []string, values []float64, label func(float64) string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Add(plotter.NewGrid())
	p.X.Tick.Marker = CleanTicks{}
	lo, hi := 0.0, 0.0
	for i, v := range values {
		lo, hi = min(lo, v), max(hi, v)
		y := float64(len(values) - 1 - i)
		bar, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(11))
		if err != nil {
			return nil, err
		}
		bar.Horizontal, bar.XMin, bar.Color = true, y, Palette[i%len(Palette)]
		bar.LineStyle.Width = 0
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: v, Y: y}}, Labels: []string{" " + label(v) + " "}})
		if err != nil {
			return nil, err
		}
		for k := range lab.TextStyle {
			lab.TextStyle[k].YAlign = -0.5
			if v < 0 {
				lab.TextStyle[k].XAlign = -1 // left of a bar that grows leftwards
			}
		}
		p.Add(bar, lab)
	}
	span := max(hi-lo, 1e-9)
	p.X.Min, p.X.Max = lo, hi
	if lo < 0 {
		p.X.Min -= 0.3 * span
	}
	if hi > 0 || lo == 0 {
		p.X.Max += 0.25 * span
	}
	rows := make([]string, len(names))
	for i, n := range names {
		rows[len(names)-1-i] = n
	}
	p.NominalY(rows...)
	return p, nil
}

// valueLabel writes a bar's value with three significant digits and no
// exponent ("1430", "47.4", "0.0612").
func valueLabel(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
