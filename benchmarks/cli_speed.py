"""How long the everyday commands take, each in a fresh process as a user runs them (wall time, median of N runs):
--help, --version, a usage error, `show` and `compare` of the committed ResNet-50 profiles, and load_json alone
inside one process. No GPU needed. The numbers go to docs/results (dated); this is a measurement, not a test.

    python benchmarks/cli_speed.py --repeats 5 [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
A = ROOT / "tests/fixtures/profile_resnet50_fp16-nhwc_b32_engines.json.gz"
B = ROOT / "tests/fixtures/profile_resnet50_fp16-nhwc_b32_fwd_bwd-data_legacy_engines.json.gz"
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "usage error (--versoin)": ["--versoin"],
    "show (ResNet-50 profile, 823 KB gz)": ["show", str(A)],
    "show --fidelity": ["show", str(A), "--fidelity"],
    "compare (two ResNet-50 profiles)": ["compare", str(A), str(B)],
}
TARGETS = {"--help": 0.5, "show (ResNet-50 profile, 823 KB gz)": 2.0}


def wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cudnn_algos", *argv], capture_output=True, cwd=ROOT, timeout=300)
    return time.perf_counter() - t0


def load_seconds() -> float:
    code = ("import time; from cudnn_algos import load_json; t = time.perf_counter(); "
            f"load_json({str(A)!r}); print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                                timeout=300).stdout.strip())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args(argv)
    out = {name: statistics.median(wall(args) for _ in range(a.repeats)) for name, args in COMMANDS.items()}
    out["load_json alone (same file, in-process)"] = statistics.median(load_seconds() for _ in range(a.repeats))
    print(f"everyday commands, wall seconds, median of {a.repeats} fresh processes ({sys.platform}, "
          f"python {sys.version.split()[0]})")
    for name, s in out.items():
        target = f"   (target <= {TARGETS[name]} s)" if name in TARGETS else ""
        print(f"  {name:<42} {s:6.2f}{target}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
