"""python_wheels.csv and cupy_packages.csv, built by tools/build_python_wheels.py from PyPI's file lists."""

import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "gpucompat" / "knowledge" / "data"
WHEELS = DATA / "python_wheels.csv"
CUPY = DATA / "cupy_packages.csv"


def _load_tool():
    spec = importlib.util.spec_from_file_location("build_python_wheels", REPO / "tools" / "build_python_wheels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tool = _load_tool()


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def wheels():
    return {(r["package"], r["version"]): r for r in _rows(WHEELS)}


@pytest.fixture(scope="module")
def cupy():
    return _rows(CUPY)


def pythons(wheels, package, version):
    p = wheels[(package, version)]["pythons"]
    return p.split(";") if p else []


# -------------------------------------------------------------- the CSVs

def test_columns_and_sources():
    for path, cols in ((WHEELS, ["package", "version", "pythons", "source"]),
                       (CUPY, ["package", "variant", "cuda", "first_version", "last_version", "series", "source"])):
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            assert reader.fieldnames == cols
            rows = list(reader)
        assert rows
        for r in rows:
            assert r["source"].startswith(f"https://pypi.org/pypi/{r['package']}/json ("), r
            assert re.search(r"read \d{4}-\d{2}-\d{2}\)$", r["source"]), r
    assert WHEELS.stat().st_size < 1_000_000


def test_pythons_tokens_are_well_formed_and_sorted(wheels):
    tok = re.compile(r"^(\d\.\d+t?|abi3 from \d\.\d+|py\d)$")
    for (pkg, ver), r in wheels.items():
        if not r["pythons"]:
            continue
        toks = r["pythons"].split(";")
        assert all(tok.match(t) for t in toks), r
        assert toks == tool.sort_tokens(toks), r


def test_every_framework_and_cupy_package_is_there(wheels):
    pkgs = {p for p, _ in wheels}
    for p in ("torch", "tensorflow", "tensorflow-gpu", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin",
              "cupy-cuda102", "cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x"):
        assert p in pkgs, p


def test_torch_windows(wheels):
    # torch 2.1.x never had a 3.12 Linux wheel on PyPI; 2.2.0 was the first.
    assert pythons(wheels, "torch", "2.1.2") == ["3.8", "3.9", "3.10", "3.11"]
    assert "3.12" in pythons(wheels, "torch", "2.2.0")
    # torch 2.9.0 dropped 3.9, added 3.14 and free-threaded builds.
    p = pythons(wheels, "torch", "2.9.0")
    assert "3.9" not in p and p[0] == "3.10"
    assert {"3.14", "3.13t", "3.14t"} <= set(p)
    assert "3.9" in pythons(wheels, "torch", "2.8.0")
    # the Python 2.7 era ended with torch 1.4
    assert "2.7" in pythons(wheels, "torch", "1.4.0")
    assert "2.7" not in pythons(wheels, "torch", "1.5.0")


def test_tensorflow_windows(wheels):
    for v in ("2.15.0", "2.15.1"):
        assert pythons(wheels, "tensorflow", v) == ["3.9", "3.10", "3.11"]
    assert pythons(wheels, "tensorflow", "2.16.1") == ["3.9", "3.10", "3.11", "3.12"]
    assert pythons(wheels, "tensorflow", "2.20.0")[-1] == "3.13"
    assert pythons(wheels, "tensorflow", "2.21.0")[0] == "3.10"


def test_tensorflow_gpu_ends_with_a_sdist_stub(wheels):
    # tensorflow-gpu 2.12.0 on PyPI is an sdist that only errors out: no Linux wheel.
    assert pythons(wheels, "tensorflow-gpu", "2.12.0") == []
    assert "no Linux x86_64 wheel" in wheels[("tensorflow-gpu", "2.12.0")]["source"]
    assert pythons(wheels, "tensorflow-gpu", "2.11.0") == ["3.7", "3.8", "3.9", "3.10"]


def test_jaxlib(wheels):
    assert pythons(wheels, "jaxlib", "0.4.30") == ["3.9", "3.10", "3.11", "3.12"]
    assert pythons(wheels, "jaxlib", "0.4.31")[0] == "3.10"
    assert "3.13t" in pythons(wheels, "jaxlib", "0.5.1")
    # jaxlib 0.4.32 was yanked: not installable
    assert pythons(wheels, "jaxlib", "0.4.32") == []
    assert "yanked" in wheels[("jaxlib", "0.4.32")]["source"]


def _series(cupy, package):
    return {int(r["series"]): r for r in cupy if r["package"] == package}


def test_cupy_cuda12x_and_13x(cupy):
    s = _series(cupy, "cupy-cuda12x")
    assert {12, 13, 14} <= set(s)
    assert s[12]["first_version"] == "12.0.0"
    assert all(r["cuda"] == "12.x" and r["variant"] == "cuda12x" for r in s.values())
    s13 = _series(cupy, "cupy-cuda13x")
    assert s13[13]["first_version"] == "13.6.0"
    assert 14 in s13


def test_cupy_cuda102_stops_after_12(cupy):
    s = _series(cupy, "cupy-cuda102")
    assert max(s) == 12
    assert s[12]["last_version"] == "12.3.0"
    assert s[7]["first_version"] == "7.2.0"
    assert all(r["cuda"] == "10.2" for r in s.values())


def test_cupy_per_minor_packages_end_at_10_and_11x_starts_at_11(cupy):
    for pkg in ("cupy-cuda112", "cupy-cuda113", "cupy-cuda114", "cupy-cuda115", "cupy-cuda116", "cupy-cuda117"):
        assert max(_series(cupy, pkg)) == 10, pkg
    assert min(_series(cupy, "cupy-cuda11x")) == 11
    assert max(_series(cupy, "cupy-cuda11x")) == 13


def test_cupy_rows_agree_with_python_wheels(cupy, wheels):
    for r in cupy:
        for v in (r["first_version"], r["last_version"]):
            assert pythons(wheels, r["package"], v), r
            assert Version(v).major == int(r["series"])


# -------------------------------------------------------------- the parser

# Real filenames from PyPI's JSON (torch 1.0.0, torch 2.9.0, cupy-cuda102 7.2.0 and 10.3.0,
# cryptography 41.0.7, jax-cuda13-plugin 0.0.1rc0, tensorflow-gpu 2.12.0); each release is
# an excerpt of its file list (e.g. 7.2.0 here keeps only its Windows wheels).
EXCERPT = {
    "releases": {
        "1.0.0": [
            {"filename": "torch-1.0.0-cp27-cp27mu-manylinux1_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-1.0.0-cp37-cp37m-manylinux1_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-1.0.0-cp36-none-macosx_10_7_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-1.0.0-cp35-none-macosx_10_6_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
        ],
        "2.9.0": [
            {"filename": "torch-2.9.0-cp313-cp313t-manylinux_2_28_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-2.9.0-cp310-cp310-manylinux_2_28_aarch64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-2.9.0-cp311-none-macosx_11_0_arm64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "torch-2.9.0-cp314-cp314-win_amd64.whl", "packagetype": "bdist_wheel", "yanked": False},
        ],
        "41.0.7": [
            {"filename": "cryptography-41.0.7-cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
             "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "cryptography-41.0.7-cp37-abi3-musllinux_1_1_x86_64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "cryptography-41.0.7-pp310-pypy310_pp73-manylinux_2_28_x86_64.whl",
             "packagetype": "bdist_wheel", "yanked": False},
        ],
        "7.2.0": [
            {"filename": "cupy_cuda102-7.2.0-cp38-cp38-win_amd64.whl", "packagetype": "bdist_wheel", "yanked": False},
            {"filename": "cupy_cuda102-7.2.0-cp36-cp36m-win_amd64.whl", "packagetype": "bdist_wheel", "yanked": False},
        ],
        "0.0.1rc0": [
            {"filename": "jax_cuda13_plugin-0.0.1rc0-py3-none-any.whl", "packagetype": "bdist_wheel", "yanked": False},
        ],
        "2.12.0": [
            {"filename": "tensorflow-gpu-2.12.0.tar.gz", "packagetype": "sdist", "yanked": False},
        ],
        "10.3.0": [
            {"filename": "cupy_cuda102-10.3.0-cp39-cp39-manylinux1_x86_64.whl", "packagetype": "bdist_wheel", "yanked": True},
        ],
    }
}


def summ(version):
    return tool.summarize_release(EXCERPT["releases"][version])


def test_parser_cp27mu_cp37m_and_macos_excluded():
    s = summ("1.0.0")
    assert s["pythons"] == ["2.7", "3.7"]  # 3.5/3.6 only had macOS wheels here
    assert s["linux_wheels"] == 2


def test_parser_free_threaded_and_other_arches_excluded():
    s = summ("2.9.0")
    assert s["pythons"] == ["3.12", "3.13t"]  # aarch64, macOS arm64, win_amd64 left out


def test_parser_abi3_compressed_platform_musllinux_and_pypy():
    assert tool.wheel_tags("cryptography-41.0.7-cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl") == (
        ["cp37"], ["abi3"], ["manylinux_2_17_x86_64", "manylinux2014_x86_64"])
    s = summ("41.0.7")
    assert s["pythons"] == ["abi3 from 3.7"]  # musllinux and PyPy wheels not counted as CPython versions


def test_parser_releases_without_linux_wheels():
    for v, what in (("7.2.0", "Windows wheel"), ("0.0.1rc0", "pure-Python wheel"), ("2.12.0", "sdist")):
        s = summ(v)
        assert s["pythons"] == [] and s["linux_wheels"] == 0
        assert what in tool.describe(s)
    y = summ("10.3.0")
    assert y["pythons"] == [] and y["all_yanked"]
    assert tool.describe(y) == "release yanked: not installable"


def test_platform_filter():
    ok = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64", "linux_x86_64"]
    bad = ["manylinux2014_aarch64", "musllinux_1_1_x86_64", "macosx_10_9_x86_64", "win_amd64", "any",
           "manylinux2014_ppc64le"]
    assert all(tool.is_linux_x86_64([p]) for p in ok)
    assert not any(tool.is_linux_x86_64([p]) for p in bad)


def test_token_sorting_and_cuda_names():
    assert tool.sort_tokens(["3.10", "3.9", "3.13t", "3.13", "abi3 from 3.8", "2.7", "py3"]) == [
        "2.7", "3.9", "3.10", "3.13", "3.13t", "abi3 from 3.8", "py3"]
    assert tool.cupy_cuda("cuda102") == "10.2"
    assert tool.cupy_cuda("cuda80") == "8.0"
    assert tool.cupy_cuda("cuda117") == "11.7"
    assert tool.cupy_cuda("cuda11x") == "11.x"


def test_offline_build_from_cache(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    for pkg in tool.FRAMEWORKS + tool.CUPY_PACKAGES:
        (cache / f"{pkg}.json").write_text("{}")  # as the tool caches a 404
    (cache / "cupy-cuda102.json").write_text(json.dumps(
        {"releases": {v: EXCERPT["releases"][v] for v in ("7.2.0", "10.3.0")} | {
            "12.3.0": [{"filename": "cupy_cuda102-12.3.0-cp311-cp311-manylinux2014_x86_64.whl",
                        "packagetype": "bdist_wheel", "yanked": False}],
            "12.0.0": [{"filename": "cupy_cuda102-12.0.0-cp38-cp38-manylinux2014_x86_64.whl",
                        "packagetype": "bdist_wheel", "yanked": False}],
        }}))
    out = tmp_path / "out"
    assert tool.main(["--cache", str(cache), "--offline", "--out", str(out), "--date", "2026-01-02"]) == 0
    printed = capsys.readouterr().out
    assert "cupy-cuda102" in printed and "not on PyPI (404)" in printed
    w = _rows(out / "python_wheels.csv")
    assert [r["version"] for r in w] == ["7.2.0", "10.3.0", "12.0.0", "12.3.0"]
    assert w[0]["pythons"] == "" and w[2]["pythons"] == "3.8"
    c = _rows(out / "cupy_packages.csv")
    # 7.2.0 (Windows only in this excerpt) and 10.3.0 (yanked) give no series; 12.x does
    assert [(r["series"], r["first_version"], r["last_version"], r["cuda"]) for r in c] == [
        ("12", "12.0.0", "12.3.0", "10.2")]
    assert c[0]["source"].endswith("read 2026-01-02)")
