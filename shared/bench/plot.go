package bench

import (
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotName is the plot's file name next to benchmarks.md.
const PlotName = "benchmarks-churn.png"

// writePlot draws versions stored, the latest manifest's bytes and the
// storage all stored manifests take during the churn, without and with
// maintenance, as three stacked panels. The y axes are logarithmic: the
// unmaintained series grows by three orders of magnitude while the
// maintained one stays flat near the bottom, and both must be readable.
func writePlot(path string, without, with []Sample) error {
	panel := func(title, ylabel string, y func(Sample) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "writes (simulated minutes, one write a minute)"
		p.Y.Label.Text = ylabel + " (log scale)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		for i, s := range []struct {
			name string
			pts  []Sample
			c    color.RGBA
		}{{"without maintenance", without, color.RGBA{R: 200, A: 255}}, {"with maintenance", with, color.RGBA{B: 200, G: 90, A: 255}}} {
			xy := make(plotter.XYs, len(s.pts))
			for j, pt := range s.pts {
				xy[j].X, xy[j].Y = float64(pt.Minute), max(y(pt), 1) // log scale: no zeros
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color = s.c
			l.Width = vg.Points(1.5)
			if i == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
		p.Legend.Top, p.Legend.Left = true, true
		return p, nil
	}
	p1, err := panel("Versions stored", "manifests", func(s Sample) float64 { return float64(s.Versions) })
	if err != nil {
		return err
	}
	p2, err := panel("Latest manifest (read by every open, rewritten by every commit)", "bytes", func(s Sample) float64 { return float64(s.LatestManifestBytes) })
	if err != nil {
		return err
	}
	p3, err := panel("Storage: all stored manifests", "bytes", func(s Sample) float64 { return float64(s.ManifestBytes) })
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(640), vg.Points(1040))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{p1}, {p2}, {p3}}, tiles, dc)
	p1.Draw(canvases[0][0])
	p2.Draw(canvases[1][0])
	p3.Draw(canvases[2][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
