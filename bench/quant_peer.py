"""PyTorch peer of serve's BenchmarkQuantBag: FBGEMM's 8-bit and 4-bit
embedding bags (torch.ops.quantized.embedding_bag_byte_rowwise_offsets,
embedding_bag_4bit_rowwise_offsets) on 1M x 64 and 100k x 16 tables,
4,096 bags of 1-20 Zipf ids (exponent 1.1), sum and mean, with and
without per-sample weights. Prints `<case> <median ns/op>` per case.

    /usr/bin/python3 bench/quant_peer.py --threads 1
"""
import argparse
import os
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=15)
a = p.parse_args()
torch.set_num_threads(a.threads)
rng = np.random.default_rng(1)


def median_ns(fn):
    fn()
    ts = []
    for _ in range(a.reps):
        t = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t)
    ts.sort()
    return ts[len(ts) // 2]


for rows, dim, tag in [(1_000_000, 64, "1Mx64"), (100_000, 16, "100kx16")]:
    w = torch.from_numpy(rng.standard_normal((rows, dim), dtype=np.float32))
    lengths = rng.integers(1, 21, 4096)
    ids = torch.from_numpy(np.minimum(rng.zipf(1.1, int(lengths.sum())) - 1, rows - 1).astype(np.int64))
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
    weights = torch.from_numpy(rng.uniform(0, 1, len(ids)).astype(np.float32))
    for fmt, pack, op in [("int8", torch.ops.quantized.embedding_bag_byte_prepack, torch.ops.quantized.embedding_bag_byte_rowwise_offsets),
                          ("int4", torch.ops.quantized.embedding_bag_4bit_prepack, torch.ops.quantized.embedding_bag_4bit_rowwise_offsets)]:
        packed = pack(w)
        for mode in ("sum", "mean"):
            for weighted in (False, True):
                psw = weights if weighted else None
                m = 0 if mode == "sum" else 1
                ns = median_ns(lambda: op(packed, ids, offsets, False, m, False, psw, None, False))
                print(f"QuantBag/{fmt}/{tag}/{mode}/{'weighted' if weighted else 'plain'} {ns}", flush=True)
