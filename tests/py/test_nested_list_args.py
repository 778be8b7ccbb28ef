"""A list argument of lists of numbers ([[1, 2], [3, 4]]): each inner list is read by
path (guarded by length, items by value), the outer one is the caller's list; changes
of either reach the caller's objects as eager's do."""
import copy

import pytest
import torch

import framejit
from conftest import assert_same


def transpose(x, rows):
    cols = list(zip(*rows))
    return x * len(cols), cols


def inner_append(x, rows):
    rows[0].append(9)
    return x * len(rows[0]), rows


def outer_append(x, rows):
    rows.append([7])
    return x * len(rows), rows


def nested_loops(x, rows):
    t = 0
    for r in rows:
        for v in r:
            t += v
    return x * t


def inner_setitem(x, rows):
    r = rows[0]
    r[0] = 100
    return x * rows[0][0], rows


def aliased_inner(x, rows, inner):
    inner.append(5)
    return x * len(rows[0]), rows


ROWS = ([[1, 2], [3, 4]], [[5], [6]], [[1.5, 2], [3, 4]], [[1, 2], [3, 4]], [[True, None], ["a", 2]])


@pytest.mark.parametrize("f", [transpose, inner_append, outer_append, nested_loops, inner_setitem])
def test_nested_list_argument_matches_eager(f):
    framejit.reset()
    c = framejit.compile(f)
    for rows in ROWS:
        if f is nested_loops and not all(isinstance(v, (int, float)) and v is not None for r in rows for v in r):
            continue
        x = torch.ones(2)
        mine, theirs = copy.deepcopy(rows), copy.deepcopy(rows)
        out, want = c(x, mine), f(x, theirs)
        assert_same(out, want)
        assert repr(mine) == repr(theirs)  # the caller's lists, changed alike


def test_transpose_compiles_whole_and_hits_its_entry():
    framejit.reset()
    c = framejit.compile(transpose)
    for _ in range(3):
        assert_same(c(torch.ones(2), [[1, 2], [3, 4]]), transpose(torch.ones(2), [[1, 2], [3, 4]]))
    s = framejit.stats(transpose)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] == 2, s


def test_an_inner_list_that_is_also_an_argument():
    framejit.reset()
    c = framejit.compile(aliased_inner)
    for _ in range(2):
        mine, theirs = [[1, 2], [3]], [[1, 2], [3]]
        assert_same(c(torch.ones(2), mine, mine[0]), aliased_inner(torch.ones(2), theirs, theirs[0]))
        assert mine == theirs
