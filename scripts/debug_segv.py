import faulthandler

faulthandler.enable()
import torch  # noqa: E402

from cudnn_algos import backend  # noqa: E402

ext = backend.load()
print(ext.versions(), flush=True)
try:
    ext.algo_names("up")
except ValueError as e:
    print("ok:", e, flush=True)
kw = dict(dtype="float32", layout="nchw", x=[2, 4, 8, 8], w=[4, 4, 3, 3], y=[2, 4, 6, 6], padding=[0, 0],
          stride=[1, 1], dilation=[1, 1], groups=1, math="default")
p = ext.ConvProblem(**kw)
print("constructed", flush=True)
print(p.describe(), flush=True)
try:
    ext.ConvProblem(**{**kw, "dtype": "int8"})
except ValueError as e:
    print("ok:", e, flush=True)
