"""attention_lab.viz.cache.LRUDict: the one bounded cache of the figure code forgets the entry
used least recently, counts hits and misses, and refuses a size that cannot hold anything."""

from __future__ import annotations

import pytest

from attention_lab.viz.cache import LRUDict


def test_storing_one_more_than_maxsize_forgets_the_least_recently_used():
    cache = LRUDict(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache["c"] = 3
    assert list(cache) == ["a", "c"]  # "b" went, not "a"


def test_a_plain_read_is_not_a_use_but_storing_again_is():
    cache = LRUDict(2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1  # plain read: "a" stays the oldest
    cache["c"] = 3
    assert "a" not in cache and list(cache) == ["b", "c"]
    cache["b"] = 20  # storing again makes "b" the newest
    cache["d"] = 4
    assert list(cache) == ["b", "d"] and cache["b"] == 20


def test_remember_makes_a_value_once_and_counts_hits_and_misses():
    cache, made = LRUDict(4), []

    def make():
        made.append(1)
        return object()

    first = cache.remember("k", make)
    assert cache.remember("k", make) is first
    assert len(made) == 1
    assert cache.get("absent", "default") == "default"
    info = cache.info()
    assert (info.hits, info.misses, info.maxsize, info.currsize) == (1, 2, 4, 1)


@pytest.mark.parametrize("maxsize", [0, -3])
def test_a_cache_that_can_hold_nothing_is_refused(maxsize):
    with pytest.raises(ValueError, match=f"maxsize={maxsize}"):
        LRUDict(maxsize)
