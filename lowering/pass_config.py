"""The PassContext options tvms's passes read, each with the kind of value it takes.

``PassContext(config={...})`` takes any key, as the Python API always has; the command line's
``--pass-config KEY=VALUE`` (tvmc's flag) takes only these, since a key no pass reads would be
silently useless there. ``parse_pass_configs(["tirx.use_async_copy=1"])`` gives the config
dict, each value converted to its option's kind: a bool (1, 0, true, false), an int, names
(comma-separated), or a JSON object (a pass's option record, e.g.
``tirx.UnrollLoop={"auto_max_step": 16}``).
"""
from __future__ import annotations

import difflib
import json
from typing import Any

from ..ir.errors import TVMSError

# name -> (kind, what it does); TVM 0.27's names and kinds, then tvms's own switches
PASS_CONFIGS: dict[str, tuple[str, str]] = {
    "tirx.use_async_copy": ("bool", "asynchronous copies (cp.async) for a software pipeline's async stages"),
    "tirx.disable_cse_tir": ("bool", "skip common subexpression elimination in the cuda pipeline"),
    "tirx.merge_static_smem": ("bool", "merge static shared memory allocations too, not only dynamic ones"),
    "tirx.UnrollLoop": ("object", "UnrollLoop's thresholds (auto_max_step, auto_max_depth, ...)"),
    "s_tir.InjectDoubleBuffer": ("object", "InjectDoubleBuffer's options (split_loop: 0, 1 or an even number)"),
    "relax.FuseOps.max_depth": ("int", "the most operators FuseOps puts in one function"),
    "relax.lift_transform_params.consume_params": ("bool", "LiftTransformParams frees the weights it transformed"),
    "relax.PadConvGroups.enable": ("bool", "tvms: pad grouped convolutions to whole vectors (CPU build)"),
    "relax.BlockChannels.enable": ("bool", "tvms: blocked channel layouts for convolutions (CPU build)"),
    "relax.WinogradConv2d.enable": ("bool", "tvms: Winograd 3x3 convolutions (CPU build)"),
    "tvms.extern_functions": ("names", "tvms: C functions beyond libm that T.call_extern may call (llvm)"),
}

_BOOLS = {"1": True, "true": True, "0": False, "false": False}


def parse_pass_configs(items: list[str] | None) -> dict[str, Any]:
    """The config of ``KEY=VALUE`` items; raises TVMSError naming the item that is wrong."""
    config: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TVMSError(f"--pass-config {item!r}: expected KEY=VALUE")
        if key not in PASS_CONFIGS:
            close = difflib.get_close_matches(key, PASS_CONFIGS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise TVMSError(f"--pass-config: unknown option {key!r}; {hint}the options are: "
                            f"{', '.join(sorted(PASS_CONFIGS))}")
        config[key] = _value(key, PASS_CONFIGS[key][0], text.strip())
    return config


def _value(key: str, kind: str, text: str) -> Any:
    if kind == "bool":
        if text.lower() not in _BOOLS:
            raise TVMSError(f"--pass-config {key}={text}: expected a bool (1, 0, true or false)")
        return _BOOLS[text.lower()]
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise TVMSError(f"--pass-config {key}={text}: expected an integer") from None
    if kind == "names":
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise TVMSError(f"--pass-config {key}={text}: expected names separated by commas")
        return names
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise TVMSError(f"--pass-config {key}={text}: expected a JSON object, e.g. {key}='{{\"name\": 1}}'")
    try:  # (the pass reads it as this does: a wrong field is a usage error here, not a failed build)
        _object_checks()[key](value)
    except TVMSError as err:
        raise TVMSError(f"--pass-config {key}={text}: {str(err).removeprefix(key + ': ')}") from None
    return value


def _object_checks() -> dict:
    """How each object option's pass reads its value (raising TVMSError on what it refuses)."""
    from .tir.gpu.inject_double_buffer import split_loop_of
    from .tir.unroll_loop import config_of

    return {"tirx.UnrollLoop": config_of, "s_tir.InjectDoubleBuffer": split_loop_of}


__all__ = ["PASS_CONFIGS", "parse_pass_configs"]
