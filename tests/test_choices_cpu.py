"""The heuristic lists' registry (choices.LISTS): every part of the package that names a list reads it, and the
extension's own table of the lists (csrc/search/engine_search.cpp, kLists) agrees with it. CPU only: the extension
is imported, nothing runs on a GPU."""
from __future__ import annotations

import pytest

from cudnn_algos import choices


def test_every_list_has_one_name_source_and_columns():
    names = [h.name for h in choices.LISTS]
    assert names == list(choices.SEARCH_LISTS) and len(set(names)) == len(names)
    assert set(choices.TORCH_LISTS) <= set(names)
    for h in choices.LISTS:
        assert choices.heuristic_list(h.name) is h and choices.heuristic_list(h.source) is h
        assert h.rank_column == f"rank_{h.name}" and h.query_column == f"query_{h.name}_ms"
    assert len({h.letter for h in choices.LISTS}) == len(choices.LISTS)
    with pytest.raises(KeyError, match="not a heuristic list.*instant, a, b, fallback"):
        choices.heuristic_list("c")


def test_the_tables_schema_and_reports_take_their_list_columns_from_the_registry():
    from cudnn_algos import regret, shards
    from cudnn_algos.results import tables

    for h in choices.LISTS:
        assert h.rank_column in tables.LONG_FORM_COLUMNS and h.query_column in tables.LONG_FORM_COLUMNS
        assert h.rank_column in tables.INT_COLUMNS
        assert shards.CORE_COLUMNS[h.rank_column] == "int" and shards.CORE_COLUMNS[h.query_column] == "float32"
        assert h.name in regret.METHODS
    # each list's first configuration is that list's pick in the regret report
    rows = [{"candidate_kind": "engine", "candidate": f"eng{i}", "status": "SUCCESS", "kernel_median_ms": 1.0 + i,
             **{x.rank_column: (0 if x is h else None) for x in choices.LISTS}}
            for i, h in enumerate(choices.LISTS)]
    got = regret.picks(rows)
    assert [got[h.name][0] for h in choices.LISTS] == [f"eng{i}" for i in range(len(choices.LISTS))]


def test_the_extension_names_the_same_lists_with_the_same_sources():
    from cudnn_algos import _ext

    try:
        ext = _ext.load()
    except Exception as e:  # noqa: BLE001  (what importing the built extension raises here is the skip's reason)
        pytest.skip(f"the extension cannot be imported here: {type(e).__name__}: {e}")
    assert [tuple(x) for x in ext.heuristic_lists()] == [(h.name, h.source) for h in choices.LISTS]
