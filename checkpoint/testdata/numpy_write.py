"""Writes numpy.safetensors, a safetensors file made with NumPy alone (the
format laid out by hand, as another writer would), for TestReadNumPyFile.
Run from this directory with /usr/bin/python3 numpy_write.py."""
import json, struct
import numpy as np

tensors = {
    "emb.weight": np.arange(12, dtype=np.float32).reshape(4, 3) / 8,
    "f64": np.array([[1.5, -2.25]], dtype=np.float64),
    "ids": np.array([3, -1, 7], dtype=np.int64),
    "i32": np.array([-5, 6], dtype=np.int32),
    "bytes": np.array([0, 200, 255], dtype=np.uint8),
    "mask": np.array([True, False], dtype=np.bool_),
    "half": np.array([1.0, -0.5, 65504.0, 1e-7], dtype=np.float16),
    "scalar": np.array(3.25, dtype=np.float32),
}
codes = {np.float32: "F32", np.float64: "F64", np.int64: "I64", np.int32: "I32",
         np.uint8: "U8", np.bool_: "BOOL", np.float16: "F16"}
header, blobs, offset = {}, [], 0
for name in sorted(tensors, key=lambda n: -tensors[n].dtype.itemsize):  # any order the format allows
    a = tensors[name]  # all C-contiguous (np.ascontiguousarray would make a scalar 1-D)
    b = a.astype(a.dtype.newbyteorder("<")).tobytes()
    header[name] = {"dtype": codes[a.dtype.type], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
    blobs.append(b)
    offset += len(b)
header["__metadata__"] = {"source": "numpy"}
js = json.dumps(header).encode()
js += b" " * (-len(js) % 8)
with open("numpy.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(js)))
    f.write(js)
    for b in blobs:
        f.write(b)
