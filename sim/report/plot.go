package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/edgesched/edgesched/sim"
)

// Plot file names written by WritePlots.
const (
	UnallocatedPlot = "unallocated_gpu.png"
	UtilizationPlot = "utilization.png"
)

// WritePlots draws the comparison's PNG plots into dir and returns the
// files written: the unallocated-GPU curve (inflate mode on a cluster with
// GPUs) and utilisation over time or arrived demand.
func (d *Document) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	var files []string
	if d.Mode == sim.Inflate && d.Capacity.GPUMilli > 0 {
		full, zoom := d.curvePlot(false), d.curvePlot(true)
		path := filepath.Join(dir, UnallocatedPlot)
		if err := SavePanels(path, 7*vg.Inch, 3.5*vg.Inch, full, zoom); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	path := filepath.Join(dir, UtilizationPlot)
	if err := d.saveUtilization(path); err != nil {
		return nil, err
	}
	return append(files, path), nil
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

// palette is Tableau 10, distinct for up to ten policies.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff},
	{0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

func (d *Document) addLines(p *plot.Plot, legend bool, points func(Run) plotter.XYs) {
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
		l.Color = palette[i%len(palette)]
		l.Dashes = plotutil.Dashes(i / len(palette))
		l.Width = vg.Points(1.5)
		p.Add(l)
		if legend {
			p.Legend.Add(pol, l)
		}
	}
	p.Legend.Top = true
}

func (d *Document) curvePlot(zoom bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: GPUs left unallocated (mean of %d seeds)", d.Scenario, len(d.Seeds))
	p.X.Label.Text = "arrived GPU demand (% of cluster GPU capacity)"
	p.Y.Label.Text = "unallocated GPU (% of capacity)"
	d.addLines(p, !zoom, func(r Run) plotter.XYs {
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
	plots := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(w, vg.Length(len(panels))*h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

func (d *Document) saveUtilization(path string) error {
	xLabel := "time (hours)"
	xOf := func(x float64) float64 { return x / 3600 }
	if d.Mode == sim.Inflate {
		xLabel = "arrived demand (% of capacity)"
		xOf = func(x float64) float64 { return 100 * x }
	}
	panel := func(title string, y func(sim.SeriesPoint) float64, legend bool) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xLabel
		p.Y.Label.Text = "% of capacity"
		d.addLines(p, legend, func(r Run) plotter.XYs {
			xy := make(plotter.XYs, len(r.Series))
			for i, s := range r.Series {
				xy[i].X, xy[i].Y = xOf(s.X), 100*y(s)
			}
			return xy
		})
		if d.Mode == sim.Inflate {
			p.Legend.Top = false // the curves rise from the bottom left
		}
		return p
	}
	panels := []*plot.Plot{
		panel(d.Scenario+": requested CPU", func(s sim.SeriesPoint) float64 { return s.AllocCPU }, true),
		panel("used CPU (requests x usage)", func(s sim.SeriesPoint) float64 { return s.UsedCPU }, false),
	}
	if d.Capacity.GPUMilli > 0 {
		panels = append(panels, panel("allocated GPU", func(s sim.SeriesPoint) float64 { return s.AllocGPU }, false))
	}
	return SavePanels(path, 7*vg.Inch, 3.2*vg.Inch, panels...)
}
