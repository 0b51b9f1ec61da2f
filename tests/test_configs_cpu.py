"""The heuristic lists' registry (configs.LISTS): every part of the package that names a list reads it, and the
extension's own table of the lists (csrc/search/engine_search.h, kHeuristicLists) agrees with it; the knob and note
names agree with the extension's, which the build checked against cuDNN's headers. CPU only: the extension is imported,
nothing runs on a GPU."""
from __future__ import annotations

import pytest

from cudnn_algos import configs


def test_every_list_has_one_name_source_and_columns():
    names = [h.name for h in configs.LISTS]
    assert names == list(configs.SEARCH_LISTS) and len(set(names)) == len(names)
    assert set(configs.TORCH_LISTS) <= set(names)
    for h in configs.LISTS:
        assert configs.heuristic_list(h.name) is h and configs.heuristic_list(h.source) is h
        assert h.rank_column == f"rank_{h.name}" and h.query_column == f"query_{h.name}_ms"
    assert len({h.letter for h in configs.LISTS}) == len(configs.LISTS)
    with pytest.raises(KeyError, match="not a heuristic list.*instant, a, b, fallback"):
        configs.heuristic_list("c")


def test_the_tables_schema_and_reports_take_their_list_columns_from_the_registry():
    from cudnn_algos.dataset import regret, shards
    from cudnn_algos.results import tables

    for h in configs.LISTS:
        assert h.rank_column in tables.LONG_FORM_COLUMNS and h.query_column in tables.LONG_FORM_COLUMNS
        assert h.rank_column in tables.INT_COLUMNS
        assert shards.CORE_COLUMNS[h.rank_column] == "int" and shards.CORE_COLUMNS[h.query_column] == "float32"
        assert h.name in regret.METHODS
    # each list's first configuration is that list's pick in the regret report
    rows = [{"candidate_kind": "engine", "candidate": f"eng{i}", "status": "SUCCESS", "kernel_median_ms": 1.0 + i,
             **{x.rank_column: (0 if x is h else None) for x in configs.LISTS}}
            for i, h in enumerate(configs.LISTS)]
    got = regret.picks(rows)
    assert [got[h.name][0] for h in configs.LISTS] == [f"eng{i}" for i in range(len(configs.LISTS))]


def _extension():
    from cudnn_algos import _ext

    try:
        return _ext.load()
    except Exception as e:  # noqa: BLE001  (what importing the built extension raises here is the skip's reason)
        pytest.skip(f"the extension cannot be imported here: {type(e).__name__}: {e}")


def test_the_extension_names_the_same_lists_with_the_same_sources():
    assert [tuple(x) for x in _extension().heuristic_lists()] == [(h.name, h.source) for h in configs.LISTS]


def test_knob_and_note_names_agree_with_the_ones_the_extension_checked_against_cudnn():
    """The extension's tables (csrc/common/knobs.h) are checked against the cuDNN headers it was built with; the
    Python tables name every value they name, in the same order (a longer Python table names values of a later
    cuDNN), and an unnamed value still gets a name."""
    from cudnn_algos import configs

    ext = _extension()
    for built, ours in ((ext.knob_names(), configs.KNOBS), (ext.numerical_note_names(), configs.NUMERICAL_NOTES),
                        (ext.behavior_note_names(), configs.BEHAVIOR_NOTES)):
        assert len(built) >= 5 and list(ours[:len(built)]) == list(built)
    assert configs.named_knobs(((2, 1), (len(configs.KNOBS) + 3, 7))) == (("TILE_SIZE", 1),
                                                                           (f"KNOB_{len(configs.KNOBS) + 3}", 7))


def test_an_engine_configuration_has_one_text_form_and_one_evidence_key():
    from cudnn_algos.configs import EngineConfig, config_key, name_key

    c = EngineConfig.parse("eng62{TILE_SIZE=0,TILEK=1}")
    assert c == EngineConfig(62, ((2, 0), (13, 1))) and c.name == "eng62{TILE_SIZE=0,TILEK=1}"
    assert EngineConfig.parse(c.name) == c and EngineConfig(1).name == "eng1" and EngineConfig.parse("eng1").knobs == ()
    assert c.named == (("TILE_SIZE", 0), ("TILEK", 1))
    assert c.key == "62,TILEK=1,TILE_SIZE=0" == config_key(62, {"TILEK": 1, "TILE_SIZE": 0}) == name_key(c.name)
    for bad, says in (("eng62{NOPE=1}", "names a knob 'NOPE'"), ("eng62{TILE_SIZE=x}", "needs an integer value"),
                      ("conv62", "is not an engine configuration name")):
        with pytest.raises(ValueError, match=says):
            EngineConfig.parse(bad)
