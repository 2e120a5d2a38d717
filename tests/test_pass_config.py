"""The PassContext options tvms's passes read (lowering/pass_config.py): what ``--pass-config``
accepts and how its values are read."""
from __future__ import annotations

import pytest

from tvms.ir.errors import TVMSError
from tvms.lowering.pass_config import PASS_CONFIGS, parse_pass_configs
from tvms.transform import PassContext


def test_values_are_read_as_their_options_kind():
    config = parse_pass_configs(["tirx.use_async_copy=1", "tirx.disable_cse_tir = False",
                                 "relax.FuseOps.max_depth=4", 'tirx.UnrollLoop={"auto_max_step": 16}',
                                 's_tir.InjectDoubleBuffer={"split_loop": 0}'])
    assert config == {"tirx.use_async_copy": True, "tirx.disable_cse_tir": False, "relax.FuseOps.max_depth": 4,
                      "tirx.UnrollLoop": {"auto_max_step": 16}, "s_tir.InjectDoubleBuffer": {"split_loop": 0}}
    assert parse_pass_configs(None) == {} and parse_pass_configs(["tirx.use_async_copy=1", "tirx.use_async_copy=0"]) \
        == {"tirx.use_async_copy": False}  # (the last one given wins)


@pytest.mark.parametrize("item, message", [
    ("tirx.use_async_copy=yes", "tirx.use_async_copy=yes: expected a bool (1, 0, true or false)"),
    ("tirx.UnrollLoop=16", "expected a JSON object"),
    ("=1", "expected KEY=VALUE"),
    ("tir.use_async_copy=1", "unknown option 'tir.use_async_copy'; did you mean 'tirx.use_async_copy'?"),
    # an object's fields as its pass reads them
    ('tirx.UnrollLoop={"auto_max_step": "abc"}', "auto_max_step takes an integer, not 'abc'"),
    ('tirx.UnrollLoop={"explicit_unroll": "false"}', "explicit_unroll takes a bool, not 'false'"),
    ('tirx.UnrollLoop={"max_step": 4}', "unknown option(s) ['max_step']"),
    ('s_tir.InjectDoubleBuffer={"split_loop": -2}', "split_loop takes 0 (no split), 1 or a positive even number, not -2"),
])
def test_a_wrong_item_is_named(item, message):
    with pytest.raises(TVMSError) as raised:
        parse_pass_configs([item])
    assert message in str(raised.value) and str(raised.value).startswith("--pass-config")


def test_list_configs_names_the_options_and_their_kinds():
    listed = PassContext.list_configs()
    assert listed["tirx.use_async_copy"] == {"type": "bool"} and listed["tirx.UnrollLoop"] == {"type": "object"}
    assert set(listed) == set(PASS_CONFIGS)


def test_every_listed_option_is_read_by_a_pass():
    """The list is what --pass-config takes, so each option in it must be read somewhere."""
    from conftest import ROOT

    sources = "".join(p.read_text() for p in (ROOT / "lowering").rglob("*.py") if p.name != "pass_config.py")
    assert [key for key in PASS_CONFIGS if f'"{key}"' not in sources] == []
