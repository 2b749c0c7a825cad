package report

import (
	"fmt"
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
		p := d.curvePlot()
		path := filepath.Join(dir, UnallocatedPlot)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return nil, fmt.Errorf("save %s: %w", UnallocatedPlot, err)
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

func (d *Document) addLines(p *plot.Plot, points func(Run) plotter.XYs) {
	for i, pol := range d.Policies() {
		xy := d.meanXY(pol, points)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			continue // NaN or Inf points: skip the line rather than fail
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(pol, l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
}

func (d *Document) curvePlot() *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: GPUs left unallocated (mean of %d seeds)", d.Scenario, len(d.Seeds))
	p.X.Label.Text = "arrived GPU demand (% of cluster GPU capacity)"
	p.Y.Label.Text = "unallocated GPU (% of capacity)"
	d.addLines(p, func(r Run) plotter.XYs {
		xy := make(plotter.XYs, len(r.Curve))
		for i, c := range r.Curve {
			xy[i].X, xy[i].Y = 100*c.ArrivedShare, 100*c.UnallocatedGPUShare
		}
		return xy
	})
	return p
}

func (d *Document) saveUtilization(path string) error {
	xLabel := "time (hours)"
	xOf := func(x float64) float64 { return x / 3600 }
	if d.Mode == sim.Inflate {
		xLabel = "arrived demand (% of capacity)"
		xOf = func(x float64) float64 { return 100 * x }
	}
	panel := func(title string, y func(sim.SeriesPoint) float64) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xLabel
		p.Y.Label.Text = "% of capacity"
		d.addLines(p, func(r Run) plotter.XYs {
			xy := make(plotter.XYs, len(r.Series))
			for i, s := range r.Series {
				xy[i].X, xy[i].Y = xOf(s.X), 100*y(s)
			}
			return xy
		})
		return p
	}
	plots := [][]*plot.Plot{
		{panel(d.Scenario+": requested CPU", func(s sim.SeriesPoint) float64 { return s.AllocCPU })},
		{panel(d.Scenario+": used CPU", func(s sim.SeriesPoint) float64 { return s.UsedCPU })},
	}
	if d.Capacity.GPUMilli > 0 {
		plots = append(plots, []*plot.Plot{panel(d.Scenario+": allocated GPU", func(s sim.SeriesPoint) float64 { return s.AllocGPU })})
	}
	img := vgimg.New(7*vg.Inch, vg.Length(len(plots))*3.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
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
