"""ONNX ImageDecoder (``script/onnx_ops_image.py``, ``runtime/image_decode.py``): ONNX's node
cases and the images ONNX ships with their expected pixels, decoded through from_onnx ->
tvms.compile -> VM; hostile bytes (garbage, truncated files, formats ONNX does not name, images
past Pillow's decompression-bomb limit) refused with a TVMSError. Pillow is optional: the
decoding tests skip without it, and without it decoding says to install it."""
from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402

import tvms  # noqa: E402
from tvms import relax  # noqa: E402
from tvms.ir.errors import TVMSError  # noqa: E402
from tvms.relax.frontend.onnx import from_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("RGB", "BGR", "Grayscale")


@pytest.fixture(scope="module")
def decoders():
    """A VM per pixel format of a model decoding an encoded stream of any length."""
    vms = {}
    for pixel_format in FORMATS:
        graph = helper.make_graph([helper.make_node("ImageDecoder", ["data"], ["image"], pixel_format=pixel_format)],
                                  "g", [helper.make_tensor_value_info("data", TP.UINT8, ["n"])],
                                  [helper.make_tensor_value_info("image", TP.UINT8, None)])
        mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
        vms[pixel_format] = relax.VirtualMachine(tvms.compile(mod, "llvm"), tvms.cpu())
    return lambda fmt, data: vms[fmt]["main"](tvms.nd.array(np.frombuffer(data, np.uint8))).numpy()


@pytest.mark.slow  # (collecting ONNX's node cases takes seconds)
def test_image_decoder_node_cases_pass():
    pytest.importorskip("PIL")
    spec = importlib.util.spec_from_file_location("onnx_suite", ROOT / "benchmarks" / "onnx_suite.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    cases = suite.node_cases("image_decoder")
    assert len(cases) == 9  # (jpeg rgb/bgr/grayscale, jpeg2k, bmp, png, tiff, webp, pnm)
    verdicts = {c.name: suite.run_tvms(*suite.case_job(c)) for c in cases}
    failures = [f"{name}: {kind}: {detail}" for name, (kind, detail) in verdicts.items() if kind != "pass"]
    assert not failures, "\n".join(failures)


def test_the_images_onnx_ships_decode_to_its_pixels(decoders):
    """(the node cases' data is made by the Pillow installed; these bytes and pixels are ONNX's own)"""
    pytest.importorskip("PIL")
    from onnx.backend.test.case.node import _image_decoder_data as shipped

    names = [n for n in dir(shipped) if n.startswith("image_decoder_decode_")]
    assert len(names) == 9
    for name in names:
        frozen = getattr(shipped, name)
        fmt = "Grayscale" if "grayscale" in name else "BGR" if "bgr" in name else "RGB"
        np.testing.assert_array_equal(decoders(fmt, np.asarray(frozen.data).tobytes()), frozen.output, err_msg=name)


def _png(width, height, mode="RGB"):
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (width, height), (10, 20, 30) if mode == "RGB" else 7).save(buffer, format="PNG")
    return buffer.getvalue()


def test_pixel_formats_and_modes(decoders):
    pytest.importorskip("PIL")
    rgb = decoders("RGB", _png(5, 3))
    assert rgb.shape == (3, 5, 3) and (rgb == [10, 20, 30]).all()
    assert (decoders("BGR", _png(5, 3)) == [30, 20, 10]).all()
    gray = decoders("Grayscale", _png(5, 3))
    assert gray.shape == (3, 5, 1) and gray.dtype == np.uint8
    assert (decoders("RGB", _png(2, 2, "L")) == 7).all() and decoders("RGB", _png(2, 2, "L")).shape == (2, 2, 3)


def test_hostile_bytes_are_refused(decoders, monkeypatch):
    pytest.importorskip("PIL")
    from PIL import Image

    png = _png(64, 64)
    bad = {"garbage": bytes(range(256)) * 4, "truncated": png[: len(png) // 2], "empty header": png[:8],
           "eps (not an ONNX format)": b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n"}
    for what, data in bad.items():
        with pytest.raises(TVMSError, match="not an image of a format ONNX names") as err:
            decoders("RGB", data)
        if what.startswith("eps"):  # (never handed to the EPS plugin, which fails without Ghostscript)
            assert "UnidentifiedImageError" in str(err.value), err.value
    # past the decompression-bomb limit (4096 pixels: Pillow errs past twice it, warns past it),
    # whatever warning filters another thread has set meanwhile (they are process-wide)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 64 * 64 // 2)
    with pytest.raises(TVMSError, match="refused: .*decompression bomb"), pytest.warns(Image.DecompressionBombWarning):
        decoders("RGB", png)  # (Pillow warns at twice the limit, and the decoder refuses)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 64 * 64 - 1)
    opened = Image.open

    def open_while_warnings_are_ignored(*args, **kwargs):
        warnings.simplefilter("ignore")
        return opened(*args, **kwargs)
    with warnings.catch_warnings():
        monkeypatch.setattr(Image, "open", open_while_warnings_are_ignored)
        with pytest.raises(TVMSError, match="refused: .*decompression bomb"):
            decoders("RGB", png)


def test_without_pillow_decoding_says_to_install_it(decoders, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # (import PIL then fails)
    with pytest.raises(TVMSError, match=r"needs Pillow, an optional dependency: pip install 'tvms\[image\]'"):
        decoders("RGB", b"\x89PNG")


def test_the_decoder_imports_pillow_only_to_decode():
    code = """
import json, sys
import tvms
from tvms.ir.registry import get_global_func
get_global_func("tvms.image.decode")
print(json.dumps(sys.modules.get("PIL") is not None))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False


def test_image_decoder_refuses_other_inputs():
    graph = helper.make_graph([helper.make_node("ImageDecoder", ["data"], ["image"], pixel_format="CMYK")], "g",
                              [helper.make_tensor_value_info("data", TP.UINT8, [10])],
                              [helper.make_tensor_value_info("image", TP.UINT8, None)])
    with pytest.raises(TVMSError, match="the pixel_format 'CMYK'"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
