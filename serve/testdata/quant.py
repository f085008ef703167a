"""Makes quant.safetensors: float32 tables, the rows PyTorch's FBGEMM
prepack makes of them (8-bit and 4-bit), and the bags its
*_rowwise_offsets ops compute from those rows.

Run with Debian's PyTorch 1.13: /usr/bin/python3 serve/testdata/quant.py
"""
import json
import struct

import numpy as np
import torch

rng = np.random.default_rng(7)
tensors = {}


def add(name, a):
    tensors[name] = np.ascontiguousarray(a)


def table(rows, dim):
    w = rng.standard_normal((rows, dim)).astype(np.float32)
    w[0] = 0.5                                      # constant row
    w[1] = 0.0                                      # zeros
    w[2, :] = -3.0
    w[2, dim // 2] = 7.25                           # two distinct values
    w[3] *= 1e4                                     # a wide range
    w[4] *= 1e-6                                    # a narrow one
    w[5] = rng.uniform(-1, 1, dim).astype(np.float32) * 65504  # fp16's range
    return w


for rows, dim in [(300, 16), (200, 64), (100, 7), (100, 6), (50, 1)]:
    w = table(rows, dim)
    tag = f"{rows}x{dim}"
    add(f"{tag}.weight", w)
    t = torch.from_numpy(w)
    p8 = torch.ops.quantized.embedding_bag_byte_prepack(t)
    add(f"{tag}.int8", p8.numpy())
    formats = [("int8", p8, torch.ops.quantized.embedding_bag_byte_rowwise_offsets)]
    if dim % 2 == 0:  # PyTorch packs 4-bit rows of an even number of columns
        p4 = torch.ops.quantized.embedding_bag_4bit_prepack(t)
        add(f"{tag}.int4", p4.numpy())
        formats.append(("int4", p4, torch.ops.quantized.embedding_bag_4bit_rowwise_offsets))
    # Bags: 64 of 0-20 ids, Zipf-like, some empty.
    lengths = rng.integers(0, 21, 64)
    lengths[:3] = 0
    ids = np.minimum(rng.zipf(1.3, int(lengths.sum())) - 1, rows - 1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    weights = rng.uniform(-2, 2, len(ids)).astype(np.float32)
    add(f"{tag}.ids", ids)
    add(f"{tag}.offsets", offsets)  # with the last offset
    add(f"{tag}.weights", weights)
    for fmt, packed, op in formats:
        for mode in (0, 1):
            for weighted in (False, True):
                psw = torch.from_numpy(weights) if weighted else None
                out = op(packed, torch.from_numpy(ids), torch.from_numpy(offsets), False, mode,
                         False, psw, None, True)
                short = op(packed, torch.from_numpy(ids), torch.from_numpy(offsets[:-1]), False, mode,
                           False, psw, None, False)
                assert torch.equal(out, short)
                add(f"{tag}.{fmt}.{['sum', 'mean'][mode]}{'.weighted' if weighted else ''}", out.numpy())

dtypes = {np.float32: "F32", np.uint8: "U8", np.int64: "I64"}
header, data = {}, b""
for name in sorted(tensors):
    a = tensors[name]
    b = a.tobytes()
    header[name] = {"dtype": dtypes[a.dtype.type], "shape": list(a.shape),
                    "data_offsets": [len(data), len(data) + len(b)]}
    data += b
header["__metadata__"] = {"torch": torch.__version__}
js = json.dumps(header).encode()
js += b" " * (-len(js) % 8)
with open("serve/testdata/quant.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(js)) + js + data)
