# Writes fixtures.json: scores and labels, and what scikit-learn's
# roc_auc_score and log_loss say of them, with NE and calibration
# transcribed in NumPy. Run with Debian's python3-sklearn:
#   /usr/bin/python3 metrics/testdata/gen.py > metrics/testdata/fixtures.json
import json

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

rng = np.random.default_rng(7)
cases = []
for name, n, rounding, skew in [("random", 1000, None, 0.0), ("ties", 500, 1, 0.5), ("many ties", 2000, 2, 1.0), ("rare clicks", 3000, None, -2.0), ("tiny", 4, None, 0.0)]:
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(1.5 * x + skew)))).astype(np.float32)
    p = (1 / (1 + np.exp(-(x + 0.3 * rng.normal(size=n))))).astype(np.float32)
    p = np.clip(p, 0.01, 0.99).astype(np.float32)
    if rounding is not None:
        p = np.clip(np.round(p, rounding), 0.01, 0.99).astype(np.float32)
    if name == "tiny":
        y = np.array([0, 1, 0, 1], np.float32)
        p = np.array([0.2, 0.8, 0.8, 0.4], np.float32)
    ctr = y.astype(np.float64).mean()
    ll = log_loss(y, p.astype(np.float64))
    ne = ll / -(ctr * np.log(ctr) + (1 - ctr) * np.log(1 - ctr))
    cases.append({
        "name": name,
        "scores": [float(v) for v in p],
        "labels": [float(v) for v in y],
        "auc": float(roc_auc_score(y, p)),
        "log_loss": float(ll),
        "ne": float(ne),
        "calibration": float(p.astype(np.float64).sum() / y.sum()),
    })
print(json.dumps(cases))
