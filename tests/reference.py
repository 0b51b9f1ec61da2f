"""Reference computations for the GPU tests: PyTorch itself, in float64 on the CPU (independent of cuDNN), and
PyTorch's own GPU convolution in the tested dtype (whose error sets the tolerance's scale)."""
from __future__ import annotations

import torch

from cudnn_algos import ConvSpec

# Relative-error floors by dtype (||y - ref|| / ||ref||, ref in float64); an algorithm may also be up to
# ERR_FACTOR times as far off as PyTorch's own convolution in the same dtype.
TOL = {torch.float64: 1e-10, torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}
ERR_FACTOR = 8.0
N_ALGOS = {"forward": 8, "backward_data": 6, "backward_filter": 7}


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    y = y.detach().double().cpu()
    ref = ref.detach().double().cpu()
    return float((y - ref).norm() / ref.norm().clamp_min(1e-300))


class Case:
    """Random layer tensors, rounded to the tested dtype; float64 CPU copies for the reference."""

    def __init__(self, spec: ConvSpec, input_shape, dtype: torch.dtype, memory_format, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.spec, self.dtype, self.fmt = spec, dtype, memory_format
        sh = spec.shapes(input_shape)
        self.shapes = sh
        fan_in = sh.weight_shape[1] * int(torch.tensor(spec.kernel_size).prod())
        master = {
            "input": torch.randn(sh.input_shape, generator=g, dtype=torch.float64),
            "weight": torch.randn(sh.weight_shape, generator=g, dtype=torch.float64) / fan_in**0.5,
            "grad_output": torch.randn(sh.output_shape, generator=g, dtype=torch.float64),
        }
        self.cpu64 = {k: v.to(dtype).double() for k, v in master.items()}  # what the GPU sees, exactly
        self.gpu = {k: self._gpu(v) for k, v in master.items()}

    def _gpu(self, t: torch.Tensor) -> torch.Tensor:
        t = t.to(device="cuda", dtype=self.dtype)
        if self.fmt in (torch.channels_last, torch.channels_last_3d) and t.dim() in (4, 5):
            fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            t = t.contiguous(memory_format=fmt)
        return t

    @staticmethod
    def _compute(spec: ConvSpec, direction: str, t: dict, **factory) -> torch.Tensor:
        m = spec.to_module(**factory)
        with torch.no_grad():
            m.weight.copy_(t["weight"])
        x = t["input"].detach().clone().requires_grad_(direction == "backward_data")
        m.weight.requires_grad_(direction == "backward_filter")
        with torch.enable_grad():
            y = m(x)
            if direction == "forward":
                return y.detach()
            target = x if direction == "backward_data" else m.weight
            (g,) = torch.autograd.grad(y, target, t["grad_output"])
        return g.detach()

    def reference(self, direction: str) -> torch.Tensor:
        return self._compute(self.spec, direction, self.cpu64, dtype=torch.float64)

    def torch_gpu(self, direction: str) -> torch.Tensor:
        return self._compute(self.spec, direction, self.gpu, device="cuda", dtype=self.dtype)

    def run_kwargs(self, direction: str) -> dict:
        g = self.gpu
        if direction == "forward":
            return dict(input=g["input"], weight=g["weight"])
        if direction == "backward_data":
            return dict(weight=g["weight"], grad_output=g["grad_output"], input_shape=self.shapes.input_shape,
                        memory_format=self.fmt)
        return dict(input=g["input"], grad_output=g["grad_output"])
