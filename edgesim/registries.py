"""The one rule every name registry keeps: a name is taken once (a plugin never silently replaces a built-in).

:func:`claim` puts an object under a name in a registry's table, and refuses a name that another object
already holds, in one line naming both sources (``module.QualName``), so that a user who installed a
plugin learns which two pieces of code want the same name. Registering the same source again (a module
imported twice, or reloaded) replaces it: that is no clash. The resource policies
(:func:`edgesim.resources.register_policy`) and the codecs (:func:`edgesim.codecs.register_codec`, and
their learning sides) call it; a new registry (access schemes, asynchronous rules) calls it too.
Standard library only.
"""

from __future__ import annotations

from typing import Any, MutableMapping

from .config import ConfigError


class RegistryClash(ConfigError):
    """A name registered twice by two different sources; the message names the name and both sources."""


def source(obj: Any) -> str:
    """Where ``obj`` was defined, as a reader finds it: ``package.module.QualName``."""
    module = getattr(obj, "__module__", None) or "?"
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{module}.{name}"


def claim(table: MutableMapping[str, Any], name: str, obj: Any, kind: str) -> Any:
    """``table[name] = obj``, unless ``name`` is held by an object of another source: then :class:`RegistryClash`,
    one line naming ``kind``, the name and both sources. Returns ``obj`` (for decorators)."""
    held = table.get(name)
    if held is not None and source(held) != source(obj):
        raise RegistryClash(f"{kind} {name!r} is registered twice: by {source(held)} and again by {source(obj)}; "
                            f"expected a name not taken (rename the plugin's {kind})")
    table[name] = obj
    return obj
