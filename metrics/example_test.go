package metrics_test

import (
	"fmt"
	"log"

	"github.com/gathergrad/gather/metrics"
)

// A click model's predictions judged as they come: the window's exact
// AUC, its log loss, NE and calibration.
func ExampleNewBinary() {
	m, err := metrics.NewBinary(metrics.Options{Window: 6})
	if err != nil {
		log.Fatal(err)
	}
	// Two batches: predicted click probabilities, and the clicks.
	if err := m.Update([]float32{0.9, 0.2, 0.7}, []float32{1, 0, 0}); err != nil {
		log.Fatal(err)
	}
	if err := m.Update([]float32{0.6, 0.1, 0.3}, []float32{1, 0, 1}); err != nil {
		log.Fatal(err)
	}
	w := m.Window()
	fmt.Printf("examples %d, AUC %.4f, log loss %.4f, NE %.4f, calibration %.4f\n", w.Examples, w.AUC, w.LogLoss, w.NE, w.Calibration)
	// Output:
	// examples 6, AUC 0.7778, log loss 0.5588, NE 0.8061, calibration 0.9333
}

// A rating model judged on held-out ratings, as Surprise reports it.
func ExampleRegression() {
	var r metrics.Regression
	if err := r.Update([]float32{3.5, 4.2, 2.0}, []float32{4, 4, 1}); err != nil {
		log.Fatal(err)
	}
	if err := r.Update([]float32{4.8}, []float32{5}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("examples %d, RMSE %.4f, MAE %.4f, bias %+.4f\n", r.Examples(), r.RMSE(), r.MAE(), r.Bias())
	// Output:
	// examples 4, RMSE 0.5766, MAE 0.4750, bias +0.1250
}
