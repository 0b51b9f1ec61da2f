"""Measuring: what is timed (``runnable``), operands and the float64 reference (``accuracy``), the kernel and
reference clocks (``clocks``), the device's matmul peak (``peak``) and the one path every search uses
(``pipeline.measure_rows``). Method: docs/measuring.md."""
from .accuracy import errors, freed_after_oom, operand_sets, reference_output
from .clocks import (KernelClockLost, KernelClockUnavailable, again_if_lost, cupti_held, kernel_clock, kernels_of,
                     reference_kernel_ms, union_length)
from .peak import peak_label, peak_or_none, peak_tflops
from .pipeline import KERNEL_CALLS, L2_MODES, PRUNE, SCREEN_CLOSE, check_config, measure_rows
from .runnable import (OutputCheckFailed, Runnable, cudnn_benchmark, first_call_ms, legacy_runnable, plan_runnable,
                       python_loop, tensor_math, torch_call, torch_runnable)

__all__ = ["errors", "freed_after_oom", "operand_sets", "reference_output", "KernelClockLost",
           "KernelClockUnavailable", "again_if_lost", "cupti_held", "kernel_clock", "kernels_of",
           "reference_kernel_ms", "union_length", "peak_label", "peak_or_none", "peak_tflops", "KERNEL_CALLS",
           "L2_MODES", "PRUNE", "SCREEN_CLOSE", "check_config", "measure_rows", "OutputCheckFailed", "Runnable",
           "cudnn_benchmark", "first_call_ms", "legacy_runnable", "plan_runnable", "python_loop", "tensor_math",
           "torch_call", "torch_runnable"]
