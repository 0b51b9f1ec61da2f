"""Every result type and its forms: rows (``rows``), whole searches (``searches``), model reports
(``model_report``), the JSON codec (``codec``), text/HTML/DataFrame rendering (``tables``) and the kernel clock's
agreement with the independent clock (``fidelity``). None of it needs a GPU; pandas is imported only by
``to_dataframe``. Files carry ``schema`` and ``kind``; ``load_json`` reads any of them back into equal objects."""
from ..choices import DIRECTIONS
from ..environment import Environment
from .codec import SCHEMA_VERSION, decode, encode, from_dict, load_json, read_json, to_dict, write_json
from .fused import ChainRow, FusedRow, FusedSearchResult, FusionReport
from .fidelity import SIZE_CLASSES, fidelity_pairs, fidelity_table, traced_high
from .model_report import EndToEnd, LayerRow, ModelReport, ProblemEntry
from .rows import (NON_FINITE, WRONG_REL_ERR, AlgoResult, EngineRow, MeasureConfig, Measurement, Stats, TorchRun,
                   wrong_output)
from .searches import EngineSearches, EngineSearchResult, SearchResult, SearchResults
from .tables import LONG_FORM_COLUMNS, TEXT_WIDTH, aligned, fit_table, format_bytes, format_ms, wrap_lines

__all__ = ["SCHEMA_VERSION", "DIRECTIONS", "Environment", "Stats", "MeasureConfig", "Measurement", "AlgoResult",
           "SearchResult", "SearchResults", "EngineRow", "TorchRun", "EngineSearchResult", "EngineSearches",
           "FusedRow", "FusedSearchResult", "ChainRow", "FusionReport",
           "ProblemEntry", "EndToEnd", "LayerRow", "ModelReport", "load_json", "write_json", "read_json",
           "format_bytes", "format_ms", "aligned", "fit_table", "wrap_lines", "TEXT_WIDTH", "fidelity_table",
           "fidelity_pairs", "traced_high", "SIZE_CLASSES", "encode", "decode", "to_dict", "from_dict",
           "LONG_FORM_COLUMNS", "WRONG_REL_ERR", "NON_FINITE", "wrong_output"]
