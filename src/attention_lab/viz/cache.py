"""One bounded cache for every picture: ``LRUDict``.

Every cache of the figure code keeps at most ``maxsize`` entries and, when full, forgets
the entry used least recently (one eviction rule everywhere):

* ``_mpl_fast``: rasterised labels, their sizes, the font files of a font;
* ``blit`` (``HeadGrid``): the pixels of each title shown before;
* ``viz.explorer.picture.Picture``: one ``HeadGrid`` per (panel count, tokens);
* ``viz.diagrams.head_split_png``: the head-split PNG per size, dpi and language.

Why not ``functools.lru_cache`` (issue 29): it caches a function's calls, and only one of
the four uses is a function call keyed by its arguments; even that one needs to ask whether
a call would be answered from the cache (the explorer draws a diagram it lacks after the
heatmaps, ``head_split_png.cached``), which ``lru_cache`` cannot tell. ``blit`` stores pixels
after a draw, and ``_mpl_fast`` keys by the text, the font files its properties resolve to
and the dpi, while the work needs the renderer at hand: neither is a call keyed by its own
arguments. ``cachetools.LRUCache`` does what
``LRUDict`` does, but would be a new dependency of the package every reader installs (it is
not among the pinned ones) for these 40 lines.
"""

from __future__ import annotations

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
