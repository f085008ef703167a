"""Splits a CPU profile of a benchmark between this module's code and
Gorgonia's, as bench/README.md reports it for BenchmarkTrainStep and
BenchmarkGraph. From the repository root:

    go test -c -o /tmp/nn.test ./nn
    GOMAXPROCS=2 /tmp/nn.test -test.run '^$' -test.bench 'BenchmarkTrainStep/dense/rows=100000$' \\
        -test.benchtime 40x -test.cpuprofile /tmp/step.prof
    python3 bench/split.py /tmp/nn.test /tmp/step.prof

Each sample goes to the innermost frame of its stack that belongs to this
module (ours) or to gorgonia.org (Gorgonia's, which includes the memory
its machines allocate and clear, and the gonum BLAS its MatMul calls, on
whatever goroutine that runs);
samples with neither, the collector's background work and the scheduler,
are "runtime". Samples under the benchmark's set-up (building the graph and
its data, before the timer starts) are left out. It prints the seconds and
shares of each part and the functions that took most in each (for
"runtime", the innermost frames)."""
import collections, re, subprocess, sys

SETUP = re.compile(r"NewEmbedding|bagBench\.values|benchCase\.make|gorgonia\.NewGraph|WithInit|NodeFromAny|"
                   r"gorgonia\.Grad\b|NewTapeMachine")
OURS = re.compile(r"^github\.com/gathergrad/gather(/nn|/internal/[a-z]+|/gradcheck)?\.")
BENCH = re.compile(r"Benchmark|bench[A-Z]|benchRuns|internal/ref\.")


def owner(frame):
    if frame.startswith("gorgonia.org/"):
        return "gorgonia"
    if OURS.match(frame) and not BENCH.search(frame):
        return "ours"
    return None


def main(binary, profile):
    text = subprocess.run(["go", "tool", "pprof", "-traces", binary, profile],
                          check=True, capture_output=True, text=True).stdout
    parts, funcs = collections.Counter(), collections.defaultdict(collections.Counter)
    for block in text.split("-----------+-------------------------------------------------------")[1:]:
        lines = [l.strip() for l in block.strip().splitlines() if l.strip()]
        if not lines:
            continue
        m = re.match(r"([\d.]+)(ms|s)\s+(.*)", lines[0])
        if not m:
            continue
        secs = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
        stack = [m.group(3)] + lines[1:]  # leaf first
        if any(SETUP.search(f) for f in stack):
            continue
        part, fn = "runtime", stack[0]
        for f in stack:
            if o := owner(f):
                part, fn = o, f
                break
        else:
            # gonum's BLAS workers, which Gorgonia's MatMul starts, run on
            # goroutines of their own: their stacks hold no Gorgonia frame.
            if any(f.startswith("gonum.org/") for f in stack):
                part = "gorgonia"
        parts[part] += secs
        funcs[part][fn] += secs
    total = sum(parts.values())
    for part in ("ours", "gorgonia", "runtime"):
        print(f"{part}: {parts[part]:.2f}s ({parts[part] / total:.0%})")
        for fn, s in funcs[part].most_common(6):
            print(f"    {s:.2f}s {fn}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
