"""Runs the PyTorch peer and the Go benchmarks of bench_cases.md in
alternating rounds and prints the README's tables (markdown) of medians.

On a shared machine speed drifts from minute to minute; alternating the two
sides round by round keeps each ratio within the same minutes. Run from the
repository root, with Debian's python3-torch:

    /usr/bin/python3 bench/compare.py --rounds 5 --procs 2,1

Each round runs `torch_peer.py --threads N` (median of 15 calls after one)
and one `-test.count 1 -test.benchtime 20x` run of BenchmarkCases and
BenchmarkBaselines with GOMAXPROCS=N; a table entry is the median over the
rounds. The Go side inherits the environment, so GOGC or GOMEMLIMIT set for
the script set the collector's pace for the benchmarks (and are named in the
tables' headings)."""
import argparse, math, os, re, statistics, subprocess, sys, tempfile

CASES = ["emb_50k_128", "emb_1m_64", "axis1", "elem_axis1", "elem_axis0"]
HERE = os.path.dirname(os.path.abspath(__file__))


def go_round(binary, procs):
    env = dict(os.environ, GOMAXPROCS=str(procs))
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "BenchmarkCases|BenchmarkBaselines",
                          "-test.benchtime", "20x", "-test.count", "1"],
                         env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"Benchmark(?:Cases|Baselines)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?", line)
        if m:
            res[m.group(1)] = (float(m.group(2)), float(m.group(3)) if m.group(3) else None)
    return res


def torch_round(procs):
    out = subprocess.run([sys.executable, os.path.join(HERE, "torch_peer.py"), "--threads", str(procs)],
                         check=True, capture_output=True, text=True).stdout
    return {name: float(ns) for name, ns in (line.split() for line in out.splitlines() if line.strip())}


def med(rounds, key, i=None):
    v = [r[key] if i is None else r[key][i] for r in rounds if key in r]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def n(x):
    return "n/a" if x is None else f"{x:,.0f}"


def table(procs, gos, torches):
    gc = "".join(f", {k}={os.environ[k]}" for k in ("GOGC", "GOMEMLIMIT") if k in os.environ)
    print(f"\nGOMAXPROCS={procs}{gc}, PyTorch --threads {procs} ({len(gos)} rounds):\n")
    print("| case | ours ns/op | PyTorch ns/op | PyTorch/ours | ours GB/s | of `copy` GB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    ratios = {"fwd": [], "fwd-reuse": [], "bwd": []}
    for c in CASES:
        for d in ("fwd", "fwd-reuse", "bwd"):
            key = f"{c}/{d}"
            ours, mbs, peer = med(gos, key, 0), med(gos, key, 1), med(torches, key)
            r = peer / ours
            ratios[d].append(r)
            of_copy = f"{mbs / med(gos, c + '/copy', 1):.0%}" if d != "bwd" else ""
            print(f"| `{key}` | {n(ours)} | {n(peer)} | {r:.2f}x | {mbs / 1000:.1f} | {of_copy} |")
    for name, rs in (("new output (fwd)", ratios["fwd"]), ("reused buffer and backward (fwd-reuse, bwd)", ratios["fwd-reuse"] + ratios["bwd"])):
        geo = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"\n{name}: geometric mean of PyTorch/ours {geo:.2f}x; lowest {min(rs):.2f}x.")
    print()
    print("| baseline (same rounds), ns/op | " + " | ".join(CASES) + " |")
    print("|---|" + "---:|" * len(CASES))
    for b in ("copy", "alloc", "ByIndices", "ByIndicesB", "naive-fwd", "naive-bwd"):
        print(f"| `{b}` | " + " | ".join(n(med(gos, f"{c}/{b}", 0)) for c in CASES) + " |")
    for c in CASES[:2]:
        fwd, pre, bwd = med(gos, c + "/fwd", 0), med(gos, c + "/fwd-reuse", 0), med(gos, c + "/bwd", 0)
        bi, bib = med(gos, c + "/ByIndices", 0), med(gos, c + "/ByIndicesB", 0)
        print(f"\nByIndices/{c}: fwd {bi / fwd:.1f}x (into a reused buffer {bi / pre:.1f}x), "
              f"ByIndicesB/bwd {bib / bwd:.1f}x", end="")
    print()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--procs", default="2,1")
    p.add_argument("--bin", default="", help="a compiled test binary; built with go test -c if empty")
    p.add_argument("--ab", default="", help="build tags of a second binary (e.g. purego): print an A/B table of the two instead")
    a = p.parse_args()
    if a.ab:
        return ab(a)
    binary = a.bin
    if not binary:
        binary = os.path.join(tempfile.mkdtemp(), "gather.bench")
        subprocess.run(["go", "test", "-c", "-o", binary, "."], check=True, cwd=os.path.dirname(HERE))
    for procs in (int(x) for x in a.procs.split(",")):
        gos, torches = [], []
        for r in range(a.rounds):
            torches.append(torch_round(procs))
            gos.append(go_round(binary, procs))
            print(f"GOMAXPROCS={procs}: round {r + 1}/{a.rounds} done", file=sys.stderr)
        table(procs, gos, torches)


def ab(a):
    """Alternates the default build (A) and one built with -tags a.ab (B)
    round by round and prints B/A of the medians per benchmark: above 1,
    the default build's special paths make it faster."""
    tmp = tempfile.mkdtemp()
    bins = {}
    for name, tags in (("A", ""), ("B", a.ab)):
        bins[name] = os.path.join(tmp, name)
        args = ["go", "test", "-c", "-o", bins[name]] + (["-tags", tags] if tags else []) + ["."]
        subprocess.run(args, check=True, cwd=os.path.dirname(HERE))
    for procs in (int(x) for x in a.procs.split(",")):
        rounds = {"A": [], "B": []}
        for r in range(a.rounds):
            for name in ("A", "B"):
                rounds[name].append(go_round(bins[name], procs))
            print(f"GOMAXPROCS={procs}: round {r + 1}/{a.rounds} done", file=sys.stderr)
        print(f"\nGOMAXPROCS={procs}, default build (A) against -tags {a.ab} (B), {a.rounds} rounds:\n")
        print("| case | A ns/op | B ns/op | B/A |")
        print("|---|---:|---:|---:|")
        for c in CASES:
            for d in ("fwd", "fwd-reuse", "bwd"):
                key = f"{c}/{d}"
                x, y = med(rounds["A"], key, 0), med(rounds["B"], key, 0)
                print(f"| `{key}` | {n(x)} | {n(y)} | {y / x:.2f} |")


if __name__ == "__main__":
    main()
