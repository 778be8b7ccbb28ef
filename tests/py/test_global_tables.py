"""An item of a module-level list read with a known (or guarded) index: that item,
guarded by path; the list's length is not guarded, so a list that grows (a log) keeps
its entry while a table whose item changes recompiles."""
import torch

import framejit
from conftest import assert_same

TABLE = [1, 4, 9, 16]
LOG = []


def scaled(x, i):
    LOG.append(i)  # a graph break that grows LOG at every call
    return x * TABLE[i], TABLE[0]


def test_table_items_are_guarded_and_a_growing_list_does_not_recompile():
    cf = framejit.compile(scaled)
    for i in (1, 3, 1, 3, 1, 3):
        x = torch.randn(3)
        assert_same(cf(x, i), scaled(x, i))
    s = framejit.stats(scaled)
    assert s["compiles"] == 2 and s["fallbacks"] == 0, s  # one per index, not per length of LOG
    TABLE[1] = 5
    try:
        x = torch.randn(3)
        assert_same(cf(x, 1), scaled(x, 1))  # the changed item is seen
    finally:
        TABLE[1] = 4
