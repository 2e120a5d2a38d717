"""Python's binding of a call's arguments to the named parameters of the function it calls, shared
by the builtins that take keywords: the positional values go to the first parameters, then each
keyword that names a parameter to it; a parameter given both ways is refused."""
from __future__ import annotations

from typing import Any, Callable, Sequence


def bind_arguments(name: str, params: Sequence[str], values: Sequence, named: dict,
                   error: Callable[[str], Exception]) -> dict:
    """Parameter name -> value for the parameters the call gives (positional values beyond the
    parameters are the caller's to judge). The keywords naming a parameter are taken out of
    ``named``; the others stay there. ``error(message)`` makes the exception to raise."""
    bound = dict(zip(params, values))
    for param in params:
        if param in named:
            if param in bound:
                raise error(f"{name} got {param!r} twice, by position and by name")
            bound[param] = named.pop(param)
    return bound
