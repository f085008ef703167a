"""Runs the PyTorch peer and the Go benchmarks of bench_cases.md in
alternating rounds and prints the README's tables (markdown) of medians.
`--tags openblas` builds the Go side with Gorgonia's products in OpenBLAS.

On a shared machine speed drifts from minute to minute; alternating the two
sides round by round keeps each ratio within the same minutes. Run from the
repository root, with Debian's python3-torch:

    /usr/bin/python3 bench/compare.py --rounds 5 --procs 2,1

Each round runs `torch_peer.py --threads N` (median of 15 calls after one)
and, with GOMAXPROCS=N, one `-test.count 1 -test.benchtime 20x` run of
BenchmarkCases and BenchmarkBaselines, `10x` of nn's BenchmarkBag and of
BenchmarkGraph, `5x` of nn's BenchmarkTrainStep (each warms up first; see
internal/ref.Steady); a table entry is the median over the rounds. It prints
every comparison: graph run and training steps, bags, the cases. The Go side
inherits the environment, so GOGC or GOMEMLIMIT set for the script set the
collector's pace for the benchmarks (and are named in the tables' headings)."""
import argparse, contextlib, io, math, os, re, statistics, subprocess, sys, tempfile, time

# OpenBLAS's own threads on top of Go's and PyTorch's oversubscribe the
# cores: both sides run OpenBLAS on the calling thread (torch_peer.py also
# refuses to run unless PyTorch is on OpenBLAS rather than the reference BLAS).
os.environ["OPENBLAS_NUM_THREADS"] = "1"

CASES = ["emb_50k_128", "emb_1m_64", "axis1", "elem_axis1", "elem_axis0"]
BAGS = ["bag_1m_64_sum", "bag_1m_64_sum_weighted", "bag_50k_128_mean"]
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


def bag_round(binary, procs):
    env = dict(os.environ, GOMAXPROCS=str(procs))
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "BenchmarkBag", "-test.benchtime", "10x",
                          "-test.count", "1"], env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"BenchmarkBag/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            res[m.group(1)] = (float(m.group(2)), None)
    return res


def step_round(binary, nn_binary, procs):
    """BenchmarkGraph (root), the steps and the losses (nn), each on
    machine.Machine, keyed as the peer prints them (Graph/emb_50k_128,
    TrainStep/<mode>/rows=<N>...), and on the TapeMachine, the same key with
    "@tape"; each (ns/op, allocs/op)."""
    env = dict(os.environ, GOMAXPROCS=str(procs))
    res = {}
    for b, pattern, benchtime in ((binary, "^BenchmarkGraph$", "10x"), (nn_binary, "^BenchmarkTrainStep$", "5x"),
                                  (nn_binary, "^BenchmarkSkipGram$", "5x"), (nn_binary, "^BenchmarkClickModel$", "5x"),
                                  (nn_binary, "^BenchmarkDLRM$", "5x"),
                                  (nn_binary, "^BenchmarkCrossEntropy$|^BenchmarkBCEWithLogits$", "20x")):
        if ONLY and not re.search(ONLY, pattern):
            continue
        out = subprocess.run([b, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime,
                              "-test.count", "1"], env=env, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"Benchmark(Graph/\S+?|TrainStep/\S+?|SkipGram|ClickModel|CrossEntropy/\S+?|BCEWithLogits/\S+?)"
                         r"/(machine|tape)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.]+ B/op\s+([\d.]+) allocs/op)?", line)
            if m:
                key = m.group(1) + ("@tape" if m.group(2) == "tape" else "")
                res[key] = (float(m.group(3)), float(m.group(4)) if m.group(4) else None)
            m = re.match(r"Benchmark(DLRM/\w+)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+[\d.]+ B/op\s+([\d.]+) allocs/op)?", line)
            if m:
                res[m.group(1)] = (float(m.group(2)), float(m.group(3)) if m.group(3) else None)
    return res


STEPS = (["Graph/emb_50k_128"] + [f"TrainStep/{m}/rows={r}" for m in ("dense", "sparse") for r in (10_000, 100_000, 1_000_000)]
         + ["SkipGram", "ClickModel", "DLRM/step", "DLRM/tables"])
LOSSES = ["CrossEntropy/CrossEntropy", "CrossEntropy/LogSoftmax+NLLLoss", "CrossEntropy/ignore_index", "CrossEntropy/class_weights", "BCEWithLogits/4096x16"]


# --only: a regexp; only the Go step and loss benchmarks whose -test.bench
# pattern it matches run (no cases, no bags), and the peer's rows it matches.
ONLY = ""


def torch_round(procs):
    out = subprocess.run([sys.executable, os.path.join(HERE, "torch_peer.py"), "--threads", str(procs)]
                         + (["--only", ONLY] if ONLY else []),
                         check=True, capture_output=True, text=True).stdout
    return {name: float(ns) for name, ns in (line.split() for line in out.splitlines() if line.strip())}


def med(rounds, key, i=None):
    v = [r[key] if i is None else r[key][i] for r in rounds if key in r]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def n(x):
    return "n/a" if x is None else f"{x:,.0f}"


def ratio_table(heading, keys, gos, torches):
    """Prints a table of our median, PyTorch's and their ratio for each key."""
    print(f"| {heading} | ours ns/op | PyTorch ns/op | PyTorch/ours |")
    print("|---|---:|---:|---:|")
    for key in keys:
        ours, peer = med(gos, key, 0), med(torches, key)
        r = f"{peer / ours:.2f}x" if ours and peer else "n/a"
        print(f"| `{key}` | {n(ours)} | {n(peer)} | {r} |")
    print()


def machine_table(heading, keys, gos, torches):
    """Prints, for each key, the medians on machine.Machine (ours), on the
    TapeMachine and PyTorch's, PyTorch's over each, the TapeMachine's over
    ours, and the allocations of a run on each."""
    print(f"| {heading} | ours ns/op | TapeMachine ns/op | PyTorch ns/op | PyTorch/ours | PyTorch/TapeMachine "
          f"| TapeMachine/ours | allocs/op ours, TapeMachine |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in keys:
        ours, tape, peer = med(gos, key, 0), med(gos, key + "@tape", 0), med(torches, key)
        ra, rb, rc = (f"{x / y:.2f}x" if x and y else "n/a" for x, y in ((peer, ours), (peer, tape), (tape, ours)))
        allocs = f"{n(med(gos, key, 1))}, {n(med(gos, key + '@tape', 1))}"
        print(f"| `{key}` | {n(ours)} | {n(tape)} | {n(peer)} | {ra} | {rb} | {rc} | {allocs} |")
    print()


def table(procs, gos, torches):
    gc = "".join(f", {k}={os.environ[k]}" for k in ("GOGC", "GOMEMLIMIT") if k in os.environ)
    print(f"\nGOMAXPROCS={procs}{gc}, PyTorch --threads {procs} ({len(gos)} rounds):\n")
    machine_table("graph run or training step", STEPS, gos, torches)
    machine_table("loss, forward and backward", LOSSES, gos, torches)
    if ONLY:
        return
    ratio_table("bag case", [f"{c}/{d}" for c in BAGS for d in ("fwd", "fwd-reuse", "bwd")], gos, torches)
    print("| case | ours ns/op | PyTorch ns/op | PyTorch/ours | ours GB/s | of `copy` GB/s | of `new-copy` GB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios = {"fwd": [], "fwd-reuse": [], "bwd": []}
    for c in CASES:
        for d in ("fwd", "fwd-reuse", "bwd"):
            key = f"{c}/{d}"
            ours, mbs, peer = med(gos, key, 0), med(gos, key, 1), med(torches, key)
            r = peer / ours
            ratios[d].append(r)
            of_copy = f"{mbs / med(gos, c + '/copy', 1):.0%}" if d != "bwd" else ""
            new_copy = med(gos, c + '/new-copy', 1)
            of_new = f"{mbs / new_copy:.0%}" if d == "fwd" and new_copy else ""
            print(f"| `{key}` | {n(ours)} | {n(peer)} | {r:.2f}x | {mbs / 1000:.1f} | {of_copy} | {of_new} |")
    for name, rs in (("new output (fwd)", ratios["fwd"]), ("reused buffer and backward (fwd-reuse, bwd)", ratios["fwd-reuse"] + ratios["bwd"])):
        geo = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"\n{name}: geometric mean of PyTorch/ours {geo:.2f}x; lowest {min(rs):.2f}x.")
    print()
    print("| baseline (same rounds), ns/op | " + " | ".join(CASES) + " |")
    print("|---|" + "---:|" * len(CASES))
    for b in ("copy", "new-copy", "alloc", "ByIndices", "ByIndicesB", "naive-fwd", "naive-bwd"):
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
    p.add_argument("--tags", default="", help="build the Go side with these tags (e.g. openblas)")
    p.add_argument("--readme", action="store_true",
                   help="also write the tables into bench/README.md, between the results markers of this build's tags")
    p.add_argument("--ab-tags", default="", help="A/B against this tree built with these tags (e.g. purego)")
    p.add_argument("--ab-patch", default="", help="A/B against this tree with this patch applied (bench/ab/*.patch)")
    p.add_argument("--ab-rev", default="", help="A/B against this git revision")
    p.add_argument("--ab-only", default="", help="a regexp: only the A/B benchmarks whose names match")
    p.add_argument("--only", default="", help="a regexp: only the step and loss rows it matches (e.g. DLRM|Cross|BCE)")
    p.add_argument("--gemm", action="store_true",
                   help="only BenchmarkGemm: gonum's, ours and (when it builds) OpenBLAS's float32 products")
    a = p.parse_args()
    global ONLY
    ONLY = a.only
    if a.gemm:
        return gemm(a)
    if a.ab_tags or a.ab_patch or a.ab_rev:
        return ab(a)
    tags = ["-tags", a.tags] if a.tags else []
    binary = a.bin
    if not binary:
        binary = os.path.join(tempfile.mkdtemp(), "gather.bench")
        subprocess.run(["go", "test", "-c", "-o", binary] + tags + ["."], check=True, cwd=os.path.dirname(HERE))
    nn_binary = binary + "-nn"
    subprocess.run(["go", "test", "-c", "-o", nn_binary] + tags + ["./nn"], check=True, cwd=os.path.dirname(HERE))
    out = io.StringIO()
    build = f"`-tags {a.tags}`" if a.tags else "the default build (the module's GEMM)"
    heading = (f"Go 1.26 ({build}) against Debian's PyTorch 1.13 on OpenBLAS (`OPENBLAS_NUM_THREADS=1`), "
               f"`compare.py --rounds {a.rounds} --procs {a.procs}{' --tags ' + a.tags if a.tags else ''}`, "
               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {revision()}. PyTorch/ours above 1: we are faster.\n")
    print(heading, file=out)
    for procs in (int(x) for x in a.procs.split(",")):
        gos, torches = [], []
        for r in range(a.rounds):
            torches.append(torch_round(procs))
            if ONLY:
                gos.append(step_round(binary, nn_binary, procs))
            else:
                gos.append({**go_round(binary, procs), **bag_round(nn_binary, procs), **step_round(binary, nn_binary, procs)})
            print(f"GOMAXPROCS={procs}: round {r + 1}/{a.rounds} done", file=sys.stderr)
        with contextlib.redirect_stdout(out):
            table(procs, gos, torches)
    print(out.getvalue())
    if a.readme:
        write_readme(a.tags or "default", out.getvalue())


def gemm(a):
    """BenchmarkGemm of internal/kernel (ours and gonum's Sgemm) and of
    openblas (-tags openblas; left out when it does not build), alternating
    the two binaries round by round; prints GFLOP/s medians per shape and
    thread count."""
    tmp = tempfile.mkdtemp()
    root = os.path.dirname(HERE)
    kbin, obin = os.path.join(tmp, "kernel.test"), os.path.join(tmp, "openblas.test")
    subprocess.run(["go", "test", "-c", "-o", kbin, "./internal/kernel"], check=True, cwd=root)
    if subprocess.run(["go", "test", "-c", "-o", obin, "-tags", "openblas", "./openblas"], cwd=root).returncode != 0:
        print("compare.py: the openblas package does not build here (libopenblas-dev?); OpenBLAS left out", file=sys.stderr)
        obin = None
    procs = [int(x) for x in a.procs.split(",")]
    runs = {}  # (shape, impl, procs) -> [GFLOP/s]
    for r in range(a.rounds):
        for p in procs:
            bins = [b for b in (kbin, obin) if b]
            for b in (bins if r % 2 == 0 else bins[::-1]):
                env = dict(os.environ, GOMAXPROCS=str(p))
                out = subprocess.run([b, "-test.run", "^$", "-test.bench", "^BenchmarkGemm$", "-test.benchtime", "200ms"],
                                     env=env, check=True, capture_output=True, text=True, cwd=os.path.dirname(b)).stdout
                for line in out.splitlines():
                    m = re.match(r"BenchmarkGemm/(\S+)/impl=(\w+?)(?:-\d+)?\s.*?([\d.]+) GFLOP/s", line)
                    if m:
                        runs.setdefault((m.group(1), m.group(2), p), []).append(float(m.group(3)))
        print(f"gemm: round {r + 1}/{a.rounds} done", file=sys.stderr)
    shapes = list(dict.fromkeys(k[0] for k in runs))
    g = lambda s, i, p: statistics.median(runs[(s, i, p)]) if (s, i, p) in runs else float("nan")
    out = io.StringIO()
    print(f"`BenchmarkGemm`, float32, GFLOP/s, medians of {a.rounds} alternating rounds (`compare.py --gemm --rounds "
          f"{a.rounds} --procs {a.procs}`), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {revision()}; "
          f"OpenBLAS on one thread of its own. Shapes m×n×k, `grad-w` with op(a) transposed.\n", file=out)
    head, rule = "| shape |", "|---|"
    for p in procs:
        head += f" gonum ({p}) | ours ({p}) | OpenBLAS ({p}) | ours/OpenBLAS ({p}) |"
        rule += "---:|---:|---:|---:|"
    print(head + "\n" + rule, file=out)
    for s in shapes:
        row = f"| `{s}` |"
        for p in procs:
            row += f" {g(s, 'gonum', p):.1f} | {g(s, 'ours', p):.1f} | {g(s, 'openblas', p):.1f} | {g(s, 'ours', p) / g(s, 'openblas', p):.2f}x |"
        print(row, file=out)
    print(out.getvalue())


def revision():
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    return r.stdout.strip() or "unknown"


def readme_tables(text, steps_only):
    """Returns text without the baselines and the bag rows PyTorch has no
    peer for (the printed output has them all); with steps_only, only the
    tables of whole steps, for a build that differs from the default one
    only in its matrix products."""
    out, skip = [], False
    for line in text.splitlines():
        if line.startswith("| baseline") or (steps_only and line.startswith(("| bag case", "| case", "| loss"))):
            skip = True
        elif skip and not line.startswith("|"):
            skip = False
        if skip or line.startswith("ByIndices/") or line.endswith("| n/a | n/a |") or (steps_only and "geometric mean" in line):
            continue
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out))


def merge_procs(text):
    """Returns text with its thread counts' sections made one: each table
    row's cells "at the first count / at the second", the lines between
    tables once a count, and the heading without the run's time (the
    commit names the run)."""
    head, *parts = re.split(r"\n(?=GOMAXPROCS=)", text)
    head = re.sub(r", \d{4}-\d\d-\d\d \d\d:\d\d UTC", "", head)
    if len(parts) != 2:
        return "\n".join([head] + parts)
    counts = [re.match(r"GOMAXPROCS=(\d+)", p).group(1) for p in parts]
    blocks = []  # per section: a list of ("table", lines) or ("text", line)
    for p in parts:
        bs, open_table = [], False
        for line in p.splitlines()[1:]:
            if line.startswith("|"):
                if open_table:
                    bs[-1][1].append(line)
                else:
                    bs.append(("table", [line]))
                open_table = True
                continue
            open_table = False
            if line.strip():
                bs.append(("text", line))
        blocks.append(bs)
    a, b = blocks
    if [k for k, _ in a] != [k for k, _ in b] or any(k == "table" and x[0] != y[0] for (k, x), (_, y) in zip(a, b)):
        return "\n".join([head] + parts)
    rounds = re.search(r"\((\d+) rounds\)", parts[0])
    out = [head, f"GOMAXPROCS={counts[0]} / {counts[1]}, PyTorch --threads {counts[0]} / {counts[1]}"
           f"{' (' + rounds.group(1) + ' rounds)' if rounds else ''}: each cell at {counts[0]} threads / at {counts[1]}.", ""]
    for (kind, x), (_, y) in zip(a, b):
        if kind == "text":
            (kx, _, vx), (ky, _, vy) = x.partition(": "), y.partition(": ")
            out += [f"{kx} ({counts[0]} / {counts[1]} threads): {vx} / {vy}" if kx == ky else f"{x} / {y}", ""]
            continue
        rows = {r.split("|")[1]: r.split("|") for r in y[2:]}
        out += x[:2]
        for r in x[2:]:
            cx = r.split("|")
            cy = rows.get(cx[1], [])
            if len(cy) != len(cx):
                cy = [""] * len(cx)
            cells = [cx[1].strip()] + [u.strip() if not v.strip() else f"{u.strip()} / {v.strip()}"
                                       for u, v in zip(cx[2:-1], cy[2:-1])]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def write_readme(tags, text):
    """Replaces the text between <!-- results TAGS --> and
    <!-- /results TAGS --> in bench/README.md with text's tables, the
    thread counts side by side."""
    text = merge_procs(readme_tables(text, tags != "default"))
    path = os.path.join(HERE, "README.md")
    with open(path) as f:
        doc = f.read()
    begin, end = f"<!-- results {tags} -->", f"<!-- /results {tags} -->"
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        print(f"compare.py: {path} keeps no {begin} table; not written", file=sys.stderr)
        return
    with open(path, "w") as f:
        f.write(doc[:i + len(begin)] + "\n" + text.strip() + "\n" + doc[j:])


def build(tree, tags, out):
    """Builds the test binaries of the root package and of nn (when the tree
    has it) from tree into out-root and out-nn; returns their paths."""
    bins = {}
    for pkg in (".", "./nn"):
        if not os.path.isdir(os.path.join(tree, pkg)):
            continue
        path = out + ("-root" if pkg == "." else "-nn")
        args = ["go", "test", "-c", "-o", path] + (["-tags", tags] if tags else []) + [pkg]
        subprocess.run(args, check=True, cwd=tree)
        bins[pkg] = path
    return bins


def ab_specs():
    """The benchmarks of an A/B: (package, -test.bench pattern, row name, benchtime)."""
    specs = []
    for c in CASES:
        for d in ("fwd", "fwd-reuse", "bwd"):
            specs.append((".", f"^BenchmarkCases$/^{c}$/^{d}$", f"{c}/{d}", "20x"))
    specs.append((".", "^BenchmarkGraph$/^emb_50k_128$/^machine$", "Graph/emb_50k_128", "10x"))
    for c in BAGS:
        for d in ("fwd", "fwd-reuse", "bwd"):
            specs.append(("./nn", f"^BenchmarkBag$/^{c}$/^{d}$", f"{c}/{d}", "10x"))
    for mode in ("dense", "sparse"):
        for rows in (10_000, 100_000, 1_000_000):
            specs.append(("./nn", f"^BenchmarkTrainStep$/^{mode}$/^rows={rows}$/^machine$", f"TrainStep/{mode}/rows={rows}", "5x"))
    specs.append(("./nn", "^BenchmarkSkipGram$/^machine$", "SkipGram", "5x"))
    specs.append(("./nn", "^BenchmarkClickModel$/^machine$", "ClickModel", "5x"))
    specs.append(("./nn", "^BenchmarkDLRM$/^step$", "DLRM/step", "5x"))
    specs.append(("./nn", "^BenchmarkDLRM$/^tables$", "DLRM/tables", "5x"))
    specs.append(("./nn", "^BenchmarkCachedStep$/^machine$", "CachedStep", "5x"))
    for c in ("CrossEntropy", "LogSoftmax+NLLLoss", "ignore_index", "class_weights"):
        specs.append(("./nn", f"^BenchmarkCrossEntropy$/^{re.escape(c)}$/^machine$", "CrossEntropy" if c == "CrossEntropy" else f"CrossEntropy/{c}", "20x"))
    specs.append(("./nn", "^BenchmarkBCEWithLogits$/^4096x16$/^machine$", "BCEWithLogits", "20x"))
    return specs


def run_one(bins, pkg, pattern, benchtime, procs):
    """Runs one benchmark and returns its ns/op, or None where the build
    has no such benchmark. An older tree without nn has TrainStep in its
    root package, and fwd-prealloc where fwd-reuse now is."""
    binary = bins.get(pkg) or bins.get(".")
    env = dict(os.environ, GOMAXPROCS=str(procs))
    for pat in (pattern, pattern.replace("fwd-reuse", "fwd-prealloc")):
        out = subprocess.run([binary, "-test.run", "^$", "-test.bench", pat, "-test.benchtime", benchtime,
                              "-test.count", "1"], env=env, check=True, capture_output=True, text=True).stdout
        m = re.search(r"^Benchmark\S+\s+\d+\s+([\d.]+) ns/op", out, re.M)
        if m:
            return float(m.group(1))
    return None


def ab(a):
    """Alternates the current tree (A) and a variant (B) benchmark by
    benchmark, A first in odd rounds and B first in even ones, and prints
    the medians and B/A per benchmark: above 1, A is faster. B is the same
    tree built with -tags a.ab_tags as well, or with a.ab_patch applied, or
    the revision a.ab_rev. Both sides are built with -tags a.tags."""
    tmp = tempfile.mkdtemp()
    root = os.path.dirname(HERE)
    bins = {"A": build(root, a.tags, os.path.join(tmp, "A"))}
    what = ""
    if a.ab_tags:
        bins["B"] = build(root, ",".join(t for t in (a.tags, a.ab_tags) if t), os.path.join(tmp, "B"))
        what = f"-tags {a.ab_tags}"
    else:
        tree = os.path.join(tmp, "tree")
        subprocess.run(["git", "worktree", "add", "--detach", tree] + ([a.ab_rev] if a.ab_rev else []),
                       check=True, cwd=root, capture_output=True)
        try:
            if a.ab_patch:
                subprocess.run(["git", "apply", os.path.abspath(a.ab_patch)], check=True, cwd=tree)
                what = f"with {os.path.basename(a.ab_patch)}"
            else:
                what = f"revision {a.ab_rev}"
            bins["B"] = build(tree, a.tags, os.path.join(tmp, "B"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=root, capture_output=True)
    specs = [s for s in ab_specs() if re.search(a.ab_only, s[2])]
    for procs in (int(x) for x in a.procs.split(",")):
        res = {"A": {}, "B": {}}
        for r in range(a.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for pkg, pattern, name, benchtime in specs:
                for side in order:
                    res[side].setdefault(name, []).append(run_one(bins[side], pkg, pattern, benchtime, procs))
            print(f"GOMAXPROCS={procs}: round {r + 1}/{a.rounds} done", file=sys.stderr)
        print(f"\nGOMAXPROCS={procs}{', -tags ' + a.tags if a.tags else ''}, this tree (A) against {what} (B), "
              f"medians of {a.rounds} rounds:\n")
        print("| benchmark | A ns/op | B ns/op | B/A |")
        print("|---|---:|---:|---:|")
        for _, _, name, _ in specs:
            x = [v for v in res["A"][name] if v is not None]
            y = [v for v in res["B"][name] if v is not None]
            mx, my = (statistics.median(x) if x else None), (statistics.median(y) if y else None)
            ratio = f"{my / mx:.2f}" if mx and my else "n/a"
            print(f"| `{name}` | {n(mx)} | {n(my)} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
