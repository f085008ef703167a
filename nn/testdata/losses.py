"""Writes losses.json: values and gradients of PyTorch's
F.cross_entropy, F.nll_loss and F.binary_cross_entropy_with_logits for the
tests of package nn (TestLossesMatchPyTorch), so that the tests need no
PyTorch. Run from this directory with Debian's python3-torch:

    /usr/bin/python3 losses.py

Every number is written as a string (repr of a float64), so that NaN and
infinities survive JSON. A float32 case's inputs are float32 values;
PyTorch computes it in float32."""
import json
import torch
import torch.nn.functional as F

torch.manual_seed(7)
cases = []


def f(t):
    return [repr(float(v)) for v in t.detach().double().flatten().tolist()]


def add(kind, name, dtype, x, y, opts, upstream_shape):
    x = x.to(dtype).detach().requires_grad_(True)
    kw = {"reduction": opts.get("reduction", "mean")}
    w = opts.get("weights")
    if w is not None:
        w = w.to(dtype)
    if kind == "bce":
        y = y.to(dtype)
        pw = opts.get("pos_weight")
        if pw is not None:
            pw = pw.to(dtype)
        loss = F.binary_cross_entropy_with_logits(x, y, pos_weight=pw, **kw)
    else:
        if "ignore" in opts:
            kw["ignore_index"] = opts["ignore"]
        # PyTorch keeps the classes on axis 1; ours are on the last axis.
        c = x.shape[-1]
        x2 = x.reshape(-1, c)
        y2 = y.reshape(-1)
        if kind == "ce":
            loss = F.cross_entropy(x2, y2, weight=w, label_smoothing=opts.get("smoothing", 0.0), **kw)
        else:
            loss = F.nll_loss(x2, y2, weight=w, **kw)
        if kw["reduction"] == "none":
            loss = loss.reshape(y.shape)
    up = torch.rand(loss.shape, dtype=dtype) + 0.5 if loss.dim() > 0 else torch.tensor(1.7, dtype=dtype)
    (g,) = torch.autograd.grad(loss, x, up)
    case = {
        "kind": kind, "name": name, "dtype": "float32" if dtype == torch.float32 else "float64",
        "shape": list(x.shape), "x": f(x), "up": f(up), "loss": f(loss), "grad": f(g),
        "reduction": kw["reduction"],
    }
    if kind == "bce":
        case["y"] = f(y)
        if opts.get("pos_weight") is not None:
            case["pos_weight"] = f(opts["pos_weight"].to(dtype))
    else:
        case["targets"] = [int(v) for v in y.flatten().tolist()]
        if "ignore" in opts:
            case["ignore"] = opts["ignore"]
        if w is not None:
            case["weights"] = f(w)
        if opts.get("smoothing"):
            case["smoothing"] = opts["smoothing"]
    cases.append(case)


for dtype in (torch.float64, torch.float32):
    for shape in ((8, 5), (2, 3, 4)):
        c = shape[-1]
        for scale in (3.0, 1000.0):
            x = torch.randn(*shape, dtype=torch.float64) * scale
            y = torch.randint(0, c, shape[:-1])
            y.view(-1)[1] = 1
            y_ign = y.clone()
            y_ign.view(-1)[0] = -100
            w = torch.rand(c, dtype=torch.float64) + 0.25
            for red in ("mean", "sum", "none"):
                tag = f"{shape}/x{scale:g}/{red}"
                add("ce", f"plain/{tag}", dtype, x, y, {"reduction": red}, None)
                add("ce", f"ignore in range/{tag}", dtype, x, y, {"reduction": red, "ignore": 1}, None)
                add("ce", f"ignore -100/{tag}", dtype, x, y_ign, {"reduction": red, "ignore": -100}, None)
                add("ce", f"weights/{tag}", dtype, x, y, {"reduction": red, "weights": w}, None)
                add("ce", f"smoothing/{tag}", dtype, x, y, {"reduction": red, "smoothing": 0.1}, None)
                add("ce", f"smoothing+weights/{tag}", dtype, x, y, {"reduction": red, "smoothing": 0.25, "weights": w}, None)
                add("ce", f"all/{tag}", dtype, x, y_ign, {"reduction": red, "smoothing": 0.2, "weights": w, "ignore": -100}, None)
                lp = torch.log_softmax(x, -1)
                add("nll", f"plain/{tag}", dtype, lp, y, {"reduction": red}, None)
                add("nll", f"ignore/{tag}", dtype, lp, y, {"reduction": red, "ignore": 1}, None)
                add("nll", f"weights/{tag}", dtype, lp, y, {"reduction": red, "weights": w}, None)
                add("nll", f"all/{tag}", dtype, lp, y_ign, {"reduction": red, "weights": w, "ignore": -100}, None)
        # Every target ignored: NaN under mean.
        x = torch.randn(3, 4, dtype=torch.float64)
        y = torch.full((3,), 2)
        for red in ("mean", "sum"):
            add("ce", f"all ignored/{red}", dtype, x, y, {"reduction": red, "ignore": 2}, None)
            add("nll", f"all ignored/{red}", dtype, x, y, {"reduction": red, "ignore": 2}, None)
        # BCE: logits of every size up to 1e4, hard and soft labels.
        x = torch.cat([torch.randn(40, dtype=torch.float64) * 4,
                       torch.tensor([1e4, -1e4, 800.0, -800.0, 90.0, -90.0, 0.0, 20.0], dtype=torch.float64)]).reshape(6, 8)
        hard = (torch.rand(6, 8) > 0.5).double()
        soft = torch.rand(6, 8, dtype=torch.float64)
        pw = torch.rand(8, dtype=torch.float64) * 3
        for red in ("mean", "sum", "none"):
            for lname, y in (("hard", hard), ("soft", soft)):
                add("bce", f"{lname}/{red}", dtype, x, y, {"reduction": red}, None)
                add("bce", f"{lname}/pos weight/{red}", dtype, x, y, {"reduction": red, "pos_weight": pw}, None)
        add("bce", "rank 3/pos weight/mean", dtype, x.reshape(2, 3, 8), soft.reshape(2, 3, 8), {"pos_weight": pw}, None)

with open("losses.json", "w") as out:
    json.dump({"torch": torch.__version__, "cases": cases}, out, indent=0)
print(len(cases), "cases")
