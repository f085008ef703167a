"""PyTorch on a table larger than memory, beside bench/bigtable: the
table of a file table.Create made, mapped with torch.from_file(shared=True),
and the same step (4,096 ids, a linear layer to 16 classes, cross
entropy, backward) with sparse SGD on the rows the batch touched
(index_add_ into the mapped table), ids uniform and Zipf (exponent 1.05).

    /usr/bin/python3 bench/bigtable_torch.py <file> [steps]

nn.Embedding(100_000_000, 64) cannot be allocated on a 24 GB machine,
so the table stays a view of the mapped file."""
import json, os, struct, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np
import torch
import torch.nn.functional as F

path = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
torch.set_num_threads(2)
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
(name, info), = [(k, v) for k, v in header.items() if k != "__metadata__"]
rows, dim = info["shape"]
offset = 8 + n + info["data_offsets"][0]
flat = torch.from_file(path, shared=True, size=(offset // 4) + rows * dim, dtype=torch.float32)
weight = flat[offset // 4:].view(rows, dim)
head = torch.nn.Linear(dim, 16, bias=False)
rng = np.random.default_rng(7)


def batch(stream):
    if stream == "uniform":
        return torch.from_numpy(rng.integers(0, rows, 4096))
    ids = rng.zipf(1.05, 3 * 4096)
    ids = ids[ids <= rows][:4096] - 1
    while len(ids) < 4096:
        more = rng.zipf(1.05, 4096)
        ids = np.concatenate([ids, more[more <= rows] - 1])[:4096]
    return torch.from_numpy(ids)


def rss():
    with open("/proc/self/status") as f:
        return ", ".join(" ".join(l.split()) for l in f if l.startswith(("VmRSS", "VmHWM")))


for stream in ("zipf", "uniform"):
    times = []
    for _ in range(steps):
        ids = batch(stream)
        y = torch.randint(0, 16, (4096,))
        t = time.perf_counter()
        e = weight.index_select(0, ids).requires_grad_()
        head.zero_grad()
        F.cross_entropy(head(e), y).backward()
        with torch.no_grad():
            weight.index_add_(0, ids, e.grad, alpha=-0.1)
            head.weight -= 0.1 * head.weight.grad
        times.append(time.perf_counter() - t)
    times.sort()
    print(f"PyTorch {stream}: median {1e3 * times[len(times) // 2]:.2f} ms, p90 {1e3 * times[len(times) * 9 // 10]:.2f} ms; {rss()}", flush=True)
