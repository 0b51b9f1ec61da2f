"""The heuristic lists' registry (choices.LISTS): every part of the package that names a list reads it, and the
extension's own table of the lists (csrc/search/engine_search.cpp, kLists) agrees with it; the knob and note names
agree with the extension's, which the build checked against cuDNN's headers. CPU only: the extension is imported,
nothing runs on a GPU."""
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
    from cudnn_algos.dataset import regret, shards
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


def _extension():
    from cudnn_algos import _ext

    try:
        return _ext.load()
    except Exception as e:  # noqa: BLE001  (what importing the built extension raises here is the skip's reason)
        pytest.skip(f"the extension cannot be imported here: {type(e).__name__}: {e}")


def test_the_extension_names_the_same_lists_with_the_same_sources():
    assert [tuple(x) for x in _extension().heuristic_lists()] == [(h.name, h.source) for h in choices.LISTS]


def test_knob_and_note_names_agree_with_the_ones_the_extension_checked_against_cudnn():
    """The extension's tables (csrc/common/knobs.h) are checked against the cuDNN headers it was built with; the
    Python tables name every value they name, in the same order (a longer Python table names values of a later
    cuDNN), and an unnamed value still gets a name."""
    from cudnn_algos import engines

    ext = _extension()
    for built, ours in ((ext.knob_names(), engines.KNOBS), (ext.numerical_note_names(), engines.NUMERICAL_NOTES),
                        (ext.behavior_note_names(), engines.BEHAVIOR_NOTES)):
        assert len(built) >= 5 and list(ours[:len(built)]) == list(built)
    assert engines.named_knobs(((2, 1), (len(engines.KNOBS) + 3, 7))) == (("TILE_SIZE", 1),
                                                                           (f"KNOB_{len(engines.KNOBS) + 3}", 7))
