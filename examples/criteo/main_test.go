package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// The command on a small synthetic file learns (its held-out AUC well
// above chance, below the file's own model's), with hashed ids and with
// raw ids through id maps, and a run stopped after its checkpoint at
// step 40 and started again ends where the uninterrupted run ends: the
// same steps, the same held-out log loss.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds")
	}
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "hashed", true: "raw"}[raw], func(t *testing.T) { testRun(t, raw) })
	}
}

func testRun(t *testing.T, raw bool) {
	c := config{lines: 20000, epochs: 2, batch: 256, rows: 5000, raw: raw, lr: 1, evalEvery: 20, seed: 3, out: io.Discard}
	full, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if full.auc < 0.6 || full.auc > full.bayesAUC {
		t.Fatalf("held-out AUC %.4f (the synthetic model's %.4f)", full.auc, full.bayesAUC)
	}
	c.checkpoint = filepath.Join(t.TempDir(), "dlrm.safetensors")
	c.maxSteps = 50 // past the checkpoint at 40
	if _, err := run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	c.maxSteps = 0
	resumed, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.resumed != 50 {
		// The stopped run checkpointed at its end too (its final
		// evaluation), at step 50.
		t.Fatalf("resumed at step %d, want 50", resumed.resumed)
	}
	if resumed.steps != full.steps || resumed.loss != full.loss || resumed.auc != full.auc {
		t.Fatalf("resumed: %d steps, AUC %v, log loss %v; uninterrupted: %d, %v, %v", resumed.steps, resumed.auc, resumed.loss, full.steps, full.auc, full.loss)
	}
	t.Logf("%d steps; held-out AUC %.4f (the synthetic model's %.4f); resumed at step 50 to the same bits", full.steps, full.auc, full.bayesAUC)
}
