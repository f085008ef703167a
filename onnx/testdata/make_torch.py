"""Writes the PyTorch fixtures of package onnx's tests (torch/<model>/).

Run from onnx/testdata with Debian's PyTorch 1.13 and ONNX 1.12:

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 make_torch.py

For each model: model.onnx (torch.onnx.export, opset 13, the batch
dimension dynamic as "batch"), input_<k>.pb (the inputs), output_0.pb
(torch's forward), and after three SGD steps (lr 0.1) on the loss
sum(output * weights): weights.pb (the loss's weights) and
tuned_<param>.pb (each parameter after the steps), tuned_output_0.pb.
"""
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper

torch.manual_seed(0)
torch.set_num_threads(1)


class Click(torch.nn.Module):
    """An embedding of users and items and an MLP over them."""

    def __init__(self):
        super().__init__()
        self.u = torch.nn.Embedding(50, 8)
        self.i = torch.nn.Embedding(40, 8)
        self.l1 = torch.nn.Linear(16, 12)
        self.l2 = torch.nn.Linear(12, 1)

    def forward(self, user, item):
        x = torch.cat([self.u(user), self.i(item)], dim=1)
        return torch.sigmoid(self.l2(torch.relu(self.l1(x))))


class Picker(torch.nn.Module):
    """Log-probabilities of a linear layer, one picked per example."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(6, 5)

    def forward(self, x, target):
        return torch.gather(torch.log_softmax(self.l(x), 1), 1, target)


class Language(torch.nn.Module):
    """examples/embedding's model: the context's embeddings, flattened,
    a tanh layer, log-probabilities of the next word."""

    def __init__(self, vocab=30, dim=6, context=3, hidden=10):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.h = torch.nn.Linear(context * dim, hidden)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, ctx):
        x = torch.flatten(self.emb(ctx), 1)
        return torch.log_softmax(self.out(torch.tanh(self.h(x))), 1)


def save(path, a):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(a)).SerializeToString())


def write(name, model, inputs, input_names):
    d = os.path.join("torch", name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(model, tuple(inputs), path, opset_version=13, input_names=input_names,
                      output_names=["out"], dynamic_axes={n: {0: "batch"} for n in input_names + ["out"]})
    onnx.checker.check_model(onnx.load(path))
    for k, x in enumerate(inputs):
        save(os.path.join(d, "input_%d.pb" % k), x.numpy())
    out = model(*inputs)
    save(os.path.join(d, "output_0.pb"), out.detach().numpy())
    weights = torch.randn(out.shape)
    save(os.path.join(d, "weights.pb"), weights.numpy())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (model(*inputs) * weights).sum().backward()
        opt.step()
    for pname, p in model.state_dict().items():
        save(os.path.join(d, "tuned_%s.pb" % pname), p.numpy())
    save(os.path.join(d, "tuned_output_0.pb"), model(*inputs).detach().numpy())


write("click", Click(), [torch.randint(0, 50, (9,)), torch.randint(0, 40, (9,))], ["user", "item"])
write("picker", Picker(), [torch.randn(7, 6), torch.randint(0, 5, (7, 1))], ["x", "target"])
write("language", Language(), [torch.randint(0, 30, (8, 3))], ["ctx"])
