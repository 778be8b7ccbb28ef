"""zip(strict=True) of iterables of different lengths: its rows are the shorter length,
and the loop that reaches its end raises CPython's ValueError there (after the rows'
work), so a handler in the frame is traced; read at once (list()), run ahead by a
generator, or uncaught, it runs in CPython (correct, not compiled)."""
import pytest
import torch

import framejit


def comprehension(x, y, ws):
    try:
        return [a * w for a, w in zip([x, y], ws, strict=True)]
    except ValueError as e:
        return str(e)


def loop_with_side_effects(x, ws, out):
    try:
        for a, w in zip([x, x, x], ws, strict=True):
            out.append(a * w)
    except ValueError as e:
        return str(e), len(out)
    return len(out)


def three_columns(x, ws, vs):
    r = []
    try:
        for p in zip([1, 2], ws, vs, strict=True):
            r.append(p)
        return r, x
    except ValueError as e:
        return str(e), r, x


def read_at_once(x, ws, vs):
    try:
        return list(zip(ws, vs, strict=True)), x
    except ValueError as e:
        return str(e), x


def generator(x, ws):
    out = []
    try:
        g = (a * w for a, w in zip([x, x], ws, strict=True))
        out.append(1)
        return list(g), out
    except ValueError as e:
        return str(e), out


CASES = [
    (comprehension, [lambda: (torch.randn(3), torch.randn(3), [1.0, 2.0]), lambda: (torch.randn(3), torch.randn(3), [1.0, 2.0, 3.0]),
                     lambda: (torch.randn(3), torch.randn(3), [1.0])], True),
    (loop_with_side_effects, [lambda: (torch.randn(2), [1.0, 2.0], []), lambda: (torch.randn(2), [1.0, 2.0, 3.0, 4.0], [])], True),
    (three_columns, [lambda: (torch.randn(2), [1, 2], [3, 4]), lambda: (torch.randn(2), [1, 2], [3]),
                     lambda: (torch.randn(2), [1, 2, 3], [3, 4, 5]), lambda: (torch.randn(2), [1], [3, 4])], True),
    (read_at_once, [lambda: (torch.randn(2), [1, 2], [3, 4]), lambda: (torch.randn(2), [1], [3, 4])], False),
    (generator, [lambda: (torch.randn(2), [1.0, 2.0]), lambda: (torch.randn(2), [1.0])], False),
]


@pytest.mark.parametrize("f,makers,whole", CASES)
def test_strict_zip_raises_where_eager_does(f, makers, whole):
    framejit.reset()
    c = framejit.compile(f)
    for make in makers * 2:
        torch.manual_seed(0)
        mine = make()
        torch.manual_seed(0)
        theirs = make()
        assert repr(c(*mine)) == repr(f(*theirs))
        assert repr(mine) == repr(theirs)  # the caller's lists, changed alike
    s = framejit.stats(f)
    assert (s["fallbacks"] == 0 and s["graph_breaks"] == 0) == whole, s
