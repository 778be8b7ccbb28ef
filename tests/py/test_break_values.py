"""Values that live across a graph break: parameters and buffers a module reads for
the first time after the break (inputs of the next segment), and the frame's own
**kwargs dict, which stays traced unless the call that breaks receives it."""
import torch

import framejit
from conftest import assert_same


def no_fallbacks(fn):
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, framejit.fallbacks(fn)
    return s


class _TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        h = self.a(x)
        print("between", end=" ")
        return self.b(h) * self.scale + self.a.bias


def test_parameters_and_buffers_first_read_after_a_break_are_graph_inputs(capsys):
    torch.manual_seed(0)
    nets = [_TwoLayers().eval(), _TwoLayers().eval()]  # two instances: one plan, their own weights
    with torch.no_grad():
        explained = framejit.explain(nets[0].forward, torch.randn(2, 4))
        assert explained.graph_count == 2
        assert len(explained.graph_breaks) == 1, explained.graph_breaks
        framejit.reset()
        for net in nets:
            cn = framejit.compile(net)
            for rows in (3, 3, 5):
                x = torch.randn(rows, 4)
                assert_same(cn(x), net(x))
            net.b.weight.mul_(-1)  # the same tensor changed in place: read at each call
            x = torch.randn(2, 4)
            assert_same(cn(x), net(x))
    assert capsys.readouterr().out == "between " * 2 * 8 + "between " * 1
    assert no_fallbacks(_TwoLayers.forward)["fallbacks"] == 0


def _scaled(y, scale=1.0, shift=0.0):
    return y * scale + shift


def kwargs_across_a_break(x, **kwargs):
    kwargs.pop("unused", None)
    y = x * 2
    print("between", end=" ")
    return _scaled(y, **kwargs)


def test_the_frames_own_kwargs_dict_stays_traced_across_a_break(capsys):
    with torch.no_grad():
        explained = framejit.explain(kwargs_across_a_break, torch.randn(3), scale=3.0, unused=1)
        assert len(explained.graph_breaks) == 1, explained.graph_breaks
        framejit.reset()
        cf = framejit.compile(kwargs_across_a_break)
        for scale in (3.0, 0.5):
            x = torch.randn(4)
            assert_same(cf(x, scale=scale, unused=1), kwargs_across_a_break(x, scale=scale, unused=1))
            assert_same(cf(x, scale=scale, shift=1.0), kwargs_across_a_break(x, scale=scale, shift=1.0))
    assert capsys.readouterr().out == "between " * 9
    no_fallbacks(kwargs_across_a_break)
