"""One bounded cache for every picture: ``LRUDict`` and the ``lru_memo`` decorator built on it.

Every cache of the figure code keeps at most ``maxsize`` entries and, when full, forgets
the entry used least recently (one eviction rule everywhere):

* ``_mpl_fast``: rasterised labels, their sizes, the font files of a font;
* ``HeadGrid``: the pixels of each title shown before;
* ``viz.explorer.picture.Picture``: one ``HeadGrid`` per (panel count, tokens);
* ``viz.diagrams.head_split_png``: the head-split PNG per size and dpi (the explorer's diagram).
"""

from __future__ import annotations

import functools
from collections import namedtuple

CacheInfo = namedtuple("CacheInfo", "hits misses maxsize currsize")
_MISSING = object()


class LRUDict(dict):
    """A dict of at most ``maxsize`` entries: storing one more forgets the least recently
    used (read with ``get`` or stored). Plain ``d[key]`` reads do not count as a use."""

    def __init__(self, maxsize: int):
        super().__init__()
        if maxsize < 1:
            raise ValueError(f"maxsize={maxsize} must be at least 1")
        self.maxsize = maxsize
        self.hits = self.misses = 0

    def get(self, key, default=None):
        """The value stored under ``key`` (now the most recently used), else ``default``."""
        value = self.pop(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        dict.__setitem__(self, key, value)  # to the end: most recently used
        self.hits += 1
        return value

    def __setitem__(self, key, value) -> None:
        self.pop(key, None)
        dict.__setitem__(self, key, value)
        while len(self) > self.maxsize:
            del self[next(iter(self))]  # the oldest: used least recently

    def remember(self, key, make):
        """The value under ``key``; on a miss, ``make()`` is stored and returned."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = make()
            self[key] = value
        return value

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, self.maxsize, len(self))


def lru_memo(maxsize: int):
    """Like ``functools.lru_cache(maxsize)``, kept in an ``LRUDict``; the wrapped function
    also has ``cached(*args, **kwargs)``: whether that call would be answered from the cache."""

    def decorate(function):
        store = LRUDict(maxsize)

        def key(args, kwargs):
            return args + tuple(sorted(kwargs.items()))

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return store.remember(key(args, kwargs), lambda: function(*args, **kwargs))

        wrapper.cached = lambda *args, **kwargs: key(args, kwargs) in store
        wrapper.cache_info = store.info
        wrapper.cache_clear = store.clear
        wrapper.cache = store
        return wrapper

    return decorate
