"""framejit.ptx: PTX of traced functions for sm_80 and sm_90, assembled by ptxas
where it is installed (no GPU needed)."""
import os
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F

import framejit

ARCHS = ["sm_80", "sm_90"]


def _ptxas():
    found = shutil.which("ptxas")
    if found is None and os.path.exists("/usr/local/cuda/bin/ptxas"):
        found = "/usr/local/cuda/bin/ptxas"
    return found


def _assemble(ptx, arch, tmp_path):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found (PATH, /usr/local/cuda/bin): the PTX cannot be assembled here")
    src = tmp_path / f"k_{arch}.ptx"
    src.write_text(ptx)
    r = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(tmp_path / f"k_{arch}.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _ptx(fn, *args, arch, traced_yet=True):
    """framejit.ptx; where the tracer does not record fn's ops yet (another
    engineer is teaching it reductions), an expected failure with that reason."""
    try:
        return framejit.ptx(fn, *args, arch=arch)
    except ValueError as e:
        if not traced_yet and "no graph" in str(e):
            pytest.xfail(f"the tracer does not record these ops yet: {e}")
        raise


def _check(fn, args, arch, tmp_path, traced_yet=True):
    ptx = _ptx(fn, *args, arch=arch, traced_yet=traced_yet)
    assert isinstance(ptx, str)
    assert f".target {arch}" in ptx
    assert ".entry" in ptx
    assert ".extern" not in ptx  # no libm / libdevice calls
    _assemble(ptx, arch, tmp_path)
    return ptx


def chain(x):
    y = x * 1.5 + 0.25
    y = torch.relu(y) - 1.0
    y = torch.abs(y) * x
    return torch.sigmoid(y) + x


def int_float_mix(a, b, c):
    return a + b, c * 3, (c * 3) / (a + b)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm_gelu(x, w, b):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b, 1e-5))


def reductions(x):
    return x.sum(dim=1), x.mean(dim=0), x.sum()


def erf_pow_where(x, y):
    return torch.where(x > y, torch.erf(x), torch.pow(x.abs(), y)), torch.expm1(y), torch.log1p(y.abs())


@pytest.mark.parametrize("arch", ARCHS)
def test_pointwise_chain(arch, tmp_path):
    ptx = _check(chain, (torch.randn(1000),), arch, tmp_path)
    assert ptx.count(".entry") == 1  # eight ops, one fused kernel


@pytest.mark.parametrize("arch", ARCHS)
def test_broadcast_int_float_mix(arch, tmp_path):
    a = torch.arange(7, dtype=torch.int64).reshape(7, 1)
    b = torch.randn(5)
    c = torch.arange(35, dtype=torch.int32).reshape(7, 5)
    _check(int_float_mix, (a, b, c), arch, tmp_path)


@pytest.mark.parametrize("arch", ARCHS)
def test_softmax(arch, tmp_path):
    _check(softmax, (torch.randn(8, 33),), arch, tmp_path, traced_yet=False)


@pytest.mark.parametrize("arch", ARCHS)
def test_layer_norm_gelu(arch, tmp_path):
    _check(layer_norm_gelu, (torch.randn(4, 64), torch.randn(64), torch.randn(64)), arch, tmp_path,
           traced_yet=False)


@pytest.mark.parametrize("arch", ARCHS)
def test_sum_mean_reductions(arch, tmp_path):
    _check(reductions, (torch.randn(6, 10),), arch, tmp_path, traced_yet=False)


@pytest.mark.parametrize("arch", ARCHS)
def test_erf_pow_where(arch, tmp_path):
    _check(erf_pow_where, (torch.randn(100), torch.randn(100)), arch, tmp_path)


def test_float64_transcendental_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="float64"):
        framejit.ptx(lambda x: torch.exp(x), torch.randn(10, dtype=torch.float64))


def test_unknown_arch():
    with pytest.raises(ValueError, match="sm_1x"):
        framejit.ptx(chain, torch.randn(10), arch="sm_1x")


def test_no_graph():
    with pytest.raises(ValueError, match="no graph"):
        framejit.ptx(lambda n: n + 1, 3)


def test_ptx_does_not_cache_or_change_results():
    x = torch.randn(50)
    framejit.ptx(chain, x)
    torch.testing.assert_close(framejit.compile(chain)(x), chain(x), rtol=1e-5, atol=1e-6)
