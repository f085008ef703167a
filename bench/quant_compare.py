"""Runs serve's BenchmarkQuantBag and bench/quant_peer.py (PyTorch's FBGEMM
quantized bags) in alternating rounds and prints the medians and
PyTorch/ours per case (above 1: we are faster).

    /usr/bin/python3 bench/quant_compare.py --rounds 5 --procs 1,2
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

p = argparse.ArgumentParser()
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--procs", default="1,2")
a = p.parse_args()
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.join(tempfile.mkdtemp(), "serve.test")
subprocess.run(["go", "test", "-c", "-o", binary, "./serve"], cwd=root, check=True)
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")

for procs in [int(x) for x in a.procs.split(",")]:
    ours, theirs = {}, {}
    for r in range(a.rounds):
        def go():
            out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "^BenchmarkQuantBag$", "-test.benchtime", "20x"],
                                 cwd=os.path.join(root, "serve"), env=dict(env, GOMAXPROCS=str(procs)),
                                 capture_output=True, text=True, check=True).stdout
            for m in re.finditer(r"^Benchmark(QuantBag/\S+?)(?:-\d+)?\s+\d+\s+(\d+) ns/op", out, re.M):
                ours.setdefault(m[1], []).append(int(m[2]))

        def torch():
            out = subprocess.run(["/usr/bin/python3", os.path.join(root, "bench/quant_peer.py"), "--threads", str(procs)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                name, ns = line.split()
                theirs.setdefault(name, []).append(int(ns))

        for run in ((go, torch) if r % 2 == 0 else (torch, go)):
            run()
    print(f"\nGOMAXPROCS={procs}, PyTorch --threads {procs} ({a.rounds} rounds, medians)\n")
    print("| case | ours ns/op | PyTorch ns/op | PyTorch/ours |")
    print("|---|---:|---:|---:|")
    for name in ours:
        o, t = statistics.median(ours[name]), statistics.median(theirs[name])
        print(f"| `{name}` | {o:,.0f} | {t:,.0f} | {t / o:.2f}x |")
