"""Measuring at scale: a corpus's problem-directions swept across GPUs with Dask.distributed (``driver``), the
tasks and the functions workers run (``tasks``), the single-writer SQLite store (``store``), and the turns workers
sharing a GPU take on it (``turns``)."""
from .driver import NO_DASK, SweepResult, dask_key, local_cluster, sweep, todo_of, worker_names
from .store import SweepStore
from .tasks import DIE_ONCE_ENV, dry_run_measure, measure_task, task_key, tasks_of
from .turns import TURN_SCOPES, GpuTurn

__all__ = ["sweep", "SweepResult", "SweepStore", "local_cluster", "worker_names", "GpuTurn", "TURN_SCOPES", "todo_of",
           "dask_key",
           "measure_task", "dry_run_measure", "tasks_of", "task_key", "DIE_ONCE_ENV", "NO_DASK"]
