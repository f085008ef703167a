"""Reads a safetensors file with NumPy alone and prints each tensor: the
check that files Write and Save make open outside Go.
    /usr/bin/python3 numpy_read.py <file>"""
import json, struct, sys
import numpy as np

codes = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
         "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?", "F16": "<f2"}
with open(sys.argv[1], "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
print("metadata", header.pop("__metadata__", None))
for name in sorted(header):
    e = header[name]
    b, end = e["data_offsets"]
    a = np.frombuffer(data[b:end], dtype=codes[e["dtype"]]).reshape(e["shape"])
    print(name, e["dtype"], list(a.shape), a.ravel()[:6].tolist())
