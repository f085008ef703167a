package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Two epochs already beat the majority baseline by a wide margin.
func TestClassifierLearns(t *testing.T) {
	ds, err := loadStdlib(64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ds.classes), 2)
	m, err := newModel(len(ds.vocab), 16, 64, len(ds.classes), 0.02)
	require.NoError(t, err)
	defer m.close()
	for epoch := range 2 {
		_, err := m.epoch(ds.train, uint64(epoch))
		require.NoError(t, err)
	}
	preds, err := m.predict(ds.test)
	require.NoError(t, err)
	require.Len(t, preds, len(ds.test))
	require.Greater(t, accuracy(ds.test, preds), ds.baseline()+0.2, "held-out accuracy against the majority baseline")
}
