"""Run by tests/test_asan_cpu.py in a process with AddressSanitizer preloaded: builds the extension from csrc/ with
-fsanitize=address (JIT, its own module name) and drives its bindings and the cudnn_algos::conv operator on the
CPU — valid and invalid arguments, errors translated at the binding edge, the winners' registry, the operator's CPU,
meta and autograd paths — many times. Prints ASAN-DRIVER-OK at the end; AddressSanitizer aborts the process on any
invalid access before that."""
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

root, build_dir = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(root))
from cudnn_algos import _build  # noqa: E402

cfg = _build.find_build_config()
C = load(name="cudnn_algos_asan", sources=_build.sources(root),
         extra_cflags=["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer", "-fvisibility=hidden",
                       *cfg.defines()],
         extra_include_paths=cfg.include_dirs(), extra_ldflags=[*cfg.ldflags(), "-fsanitize=address"],
         build_directory=build_dir, verbose=False)


def raises(f):
    try:
        f()
    except Exception:  # noqa: BLE001 (any Python exception is the point: not a crash)
        return
    raise AssertionError(f"no exception from {f}")


def problem(**kw):
    a = dict(dtype="float16", layout=C.Layout.nhwc, x=[2, 8, 16, 16], w=[16, 8, 3, 3], y=[2, 16, 16, 16],
             padding=[1, 1], stride=[1, 1], dilation=[1, 1], groups=1, math=C.MathType.default)
    a.update(kw)
    return C.ConvProblem(**a)


keys = []
for i in range(200):
    p = problem(x=[2, 8, 16 + i % 5, 16], y=[2, 16, 16 + i % 5, 16])
    assert "x=(2,8," in p.describe() and repr(p)
    for d in C.Direction.__members__.values():
        keys.append(C.problem_key(d, p, i % 2 == 0, i % 3 == 0))
    # the pickle protocol's two halves (this JIT module cannot be imported by name, as pickle.loads would need)
    q = type(p).__new__(type(p))
    q.__setstate__(p.__getstate__())
    assert q.describe() == p.describe()
for bad in (dict(dtype="int8"), dict(layout="nchwc"), dict(math="fast"), dict(math=7), dict(x=[2, 8, 16])):
    raises(lambda bad=bad: problem(**bad))
raises(lambda: C.problem_key("sideways", problem(), False, False))  # a string is not the bound enum
raises(lambda: C.algo_names("forward"))
assert len(C.algo_names(C.Direction.forward)) == 8
for i, k in enumerate(keys):
    C.pinned_set(k, i % 70, [(2, i % 4), (13, 1)] * (i % 3))
C.pinned_set(keys[0], -1, [])
assert C.pinned_counts() == [] and C.pinned_plans_built() == 0
C.pinned_clear()
C.pinned_reset_counts()
raises(lambda: C.engine_search(C.Direction.forward, problem(), device=0))  # no GPU here: an exception, not a crash
raises(lambda: C.engine_search(C.Direction.forward, problem(w=[16, 8, 3]), device=0))
raises(lambda: C.engine_search(C.Direction.forward, problem(), heuristics=["instant"], device=0))

conv, conv_bwd = torch.ops.cudnn_algos.conv, torch.ops.cudnn_algos.conv_backward
for i in range(100):
    x = torch.randn(2, 4, 9 + i % 3, 9, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True) if i % 2 else None
    y = conv(x, w, b, [1, 1 + i % 2], [1, 1], [1, 1], 2)
    y.pow(2).sum().backward()
    ref = torch.nn.functional.conv2d(x, w, b, stride=(1, 1 + i % 2), padding=1, groups=2)
    assert torch.allclose(y, ref, atol=1e-5)
    x1 = torch.randn(2, 4, 20 + i % 4)
    assert conv(x1, torch.randn(8, 4, 5), None, [2], [2], [1], 1).shape[-1] == (20 + i % 4 + 4 - 5) // 2 + 1
    m = conv(x.detach().to("meta"), w.detach().to("meta"), None, [2, 2], [1, 1], [1, 1], 2)
    assert m.device.type == "meta"
    gx, gw, gb = conv_bwd(torch.randn_like(ref), x.detach(), w.detach(), [1, 1 + i % 2], [1, 1], [1, 1], 2,
                          [True, True, True])
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == (6,)
convt, convt_bwd = torch.ops.cudnn_algos.conv_transpose, torch.ops.cudnn_algos.conv_transpose_backward
for i in range(50):  # transposed layers: the same paths with output_padding
    x = torch.randn(2, 4, 5 + i % 3, 6, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True) if i % 2 else None
    y = convt(x, w, b, [2, 2], [1, 1], [i % 2, 1], [1, 1], 2)
    y.pow(2).sum().backward()
    ref = torch.nn.functional.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(i % 2, 1), groups=2)
    assert torch.allclose(y, ref, atol=1e-5)
    m = convt(x.detach().to("meta"), w.detach().to("meta"), None, [2, 2], [1, 1], [i % 2, 1], [1, 1], 2)
    assert m.shape == ref.shape and m.device.type == "meta"
    gx, gw, gb = convt_bwd(torch.randn_like(ref), x.detach(), w.detach(), [2, 2], [1, 1], [i % 2, 1], [1, 1], 2,
                           [True, True, True])
    assert gx.shape == x.shape and gw.shape == w.shape and gb.shape == (6,)
    key = C.operator_key(C.Direction.backward_data, x.detach().to("meta"), w.detach().to("meta"), [2, 2], [1, 1], [1, 1], 2,
                         False, True, True, [i % 2, 1])
    assert key.startswith("backward_data float32")
raises(lambda: C.operator_key(C.Direction.backward_data, torch.empty(2, 4, 5, 6, device="meta"),
                              torch.empty(4, 3, 3, 3, device="meta"), [1, 1], [1, 1], [1, 1], 1, False, True, True,
                              [0, 1, 1]))  # output_padding of the wrong length
raises(lambda: conv(torch.randn(2, 4, 9, 9), torch.randn(6, 2, 3), None, [1, 1], [1, 1], [1, 1], 2))
raises(lambda: conv(torch.randn(2, 4, 9, 9, device="meta"), torch.randn(6, 2, 3, device="meta"), None, [1, 1], [1, 1],
                    [1, 1], 2))
for i in range(50):  # the bound call apply() uses (Note [the Python call]): arguments owned by the object
    bound = C.BoundConv([1, 1 + i % 2], [1, 1], [], [1, 1], 2, False)
    x = torch.randn(2, 4, 9, 9 + i % 3, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, requires_grad=True)
    y = bound(x, w, torch.randn(6) if i % 2 else None)
    y.sum().backward()
    assert y.shape == torch.nn.functional.conv2d(x, w, None, (1, 1 + i % 2), 1, groups=2).shape
    bound_t = C.BoundConv([2, 2], [1, 1], [i % 2, 1], [1, 1], 2, True)
    assert bound_t(torch.randn(2, 4, 5, 6), torch.randn(4, 3, 3, 3), None).shape[1] == 6
    del bound, bound_t
raises(lambda: C.BoundConv([0, 0], [1, 1], [], [1, 1], 1, False)(torch.randn(1, 2, 5, 5), torch.randn(2, 2, 3, 3),
                                                                 None))  # stride 0: torch's error, not a crash
print("ASAN-DRIVER-OK", flush=True)
