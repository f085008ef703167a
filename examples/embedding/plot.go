package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotLoss writes the training and held-out loss against step as a PNG.
func plotLoss(path string, res *result) error {
	p := plot.New()
	p.Title.Text = "next-token loss"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "nats per token"
	p.Legend.Top = true

	train, held := make(plotter.XYs, 0, len(res.steps)), make(plotter.XYs, len(res.steps))
	for i, s := range res.steps {
		if i > 0 { // the first training point is the untrained model's held-out loss
			train = append(train, plotter.XY{X: float64(s), Y: res.trainLoss[i]})
		}
		held[i] = plotter.XY{X: float64(s), Y: res.heldOut[i]}
	}
	base := plotter.XYs{{X: 0, Y: res.unigram}, {X: float64(res.steps[len(res.steps)-1]), Y: res.unigram}}
	for _, c := range []struct {
		name string
		xy   plotter.XYs
		n    int
	}{{"training (mean since last point)", train, 0}, {"held-out", held, 1}, {"unigram baseline (held-out)", base, 2}} {
		if len(c.xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(c.xy)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = plotColors[c.n]
		if c.n == 2 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(c.name, l)
	}
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	return nil
}

var plotColors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 127, G: 127, B: 127, A: 255},
}
