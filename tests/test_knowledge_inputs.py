"""What the knowledge does with releases it does not hold, with hostile command-line values,
and how often it reads this interpreter's metadata (found by an adversarial tester)."""

import ast
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from gpucompat.envs import current
from gpucompat.errors import UserError
from gpucompat.knowledge import fatbin, tables
from gpucompat.answers.explain import explain
from gpucompat.knowledge.rules import predict_stack

H100 = (None, "9.0", "580.65.06")


# -- releases the tables do not hold: uncertain, never pass ------------------------------------

@pytest.mark.parametrize("spec, driver", [
    ("cupy-cuda99x==14.0.0", "580.65.06"),      # a package PyPI's file lists in the tables do not hold
    ("cuda-runtime==6.5", "580.65.06"),         # older than the tables' CUDA 7.0
    ("cuda-runtime==14.0", "620.1"),            # a driver past the tables' newest row: its reach is unknown
])
def test_releases_the_knowledge_does_not_hold_are_uncertain(spec, driver):
    result = explain(spec, None, "9.0", driver, "3.12")  # a Python these releases have wheels for, whatever runs the test
    assert result["verdict"] == "uncertain", result["reasons"]
    deciding = [r for r in result["reasons"] if r["verdict"] == "uncertain"]
    assert any("no data for" in r["text"] or "not in the knowledge tables" in r["text"] for r in deciding), deciding


def test_a_jax_release_past_the_newest_the_tables_include_is_uncertain(monkeypatch):
    """jax rows hold from their version on, so past the newest series they were checked against (newest_releases.csv)
    they would be a guess. The packaged tables include PyPI's newest jax, so they are made to stop one series earlier."""
    real = tables.newest_release
    monkeypatch.setattr(tables, "newest_release", lambda framework: {**real("jax"), "newest": "0.11"} if framework == "jax" else real(framework))
    result = explain("jax[cuda13]==0.12.0", None, "9.0", "580.65.06", "3.12")
    assert result["verdict"] == "uncertain", result["reasons"]
    assert any("no data for jax 0.12.0" in r["text"] and r["source"] for r in result["reasons"] if r["verdict"] == "uncertain")


@pytest.mark.parametrize("spec", ["cupy-cuda12x==99", "jax[cuda12]==99.0", "torch==99", "torch==99+cu130", "tensorflow==99.0"])
def test_releases_the_index_does_not_have_are_no_such_release(spec):
    """Past the newest release PyPI's lists (as last read) hold: never uncertain, and the way to learn a newer one is said."""
    with pytest.raises(UserError, match=r"no such release — PyPI's .* releases as read on [0-9-]+ go up to .*gpucompat knowledge update"):
        explain(spec, None, "9.0", "580.65.06", "3.12")


@pytest.mark.parametrize("spec", ["cupy-cuda99x==14.0.0", "jax[cuda13]==0.12.0", "cuda-runtime==6.5"])
def test_the_no_data_rules_cite_where_they_looked(spec):
    result = explain(spec, *H100)
    assert all(r["source"] for r in result["reasons"] if "no data for" in r["text"])


def test_a_cuda_release_that_cannot_exist_is_a_user_error():
    # CUDA began at 1.0: 'cuda-runtime==0' is a typo, said plainly; predict() (sweeps) calls it uncertain
    with pytest.raises(UserError, match="not a CUDA release"):
        explain("cuda-runtime==0", *H100)
    assert predict_stack("cuda-runtime", "0", "default", "9.0", "580.65.06").verdict == "uncertain"


def test_a_newer_cuda_minor_is_still_judged_by_its_major_and_a_newer_major_by_a_known_older_driver():
    # NVIDIA documents minor-version compatibility for the whole 13.x family (seen on the H200: docs/evidence)
    minor = predict_stack("cuda-runtime", "13.5", "default", "9.0", "580.159.04")
    assert minor.verdict == "pass" and "every CUDA 13.x" in minor.reasons[0].text and minor.reasons[0].source
    # driver 580 supports exactly CUDA 13.0, so a CUDA 14 runtime is a newer major than it can run
    major = predict_stack("cuda-runtime", "14.0", "default", "9.0", "580.65.06")
    assert (major.verdict, major.code) == ("fail", "DRIVER_TOO_OLD")


def test_a_cupy_series_without_that_package_cannot_be_installed():
    for spec in ("cupy-cuda11x==14.2.0", "cupy-cuda13x==13.3.0"):  # v14 dropped CUDA 11; cuda13x began at 13.6.0
        result = explain(spec, *H100)
        assert (result["verdict"], result["code"], result["stage"]) == ("fail", "ENV_UNRESOLVABLE", "resolve")
        assert result["reasons"][0]["source"].startswith("https://")
    # installable; without [ctk] it runs where the system has a CUDA toolkit for NVRTC (issue 40.3): conditional, not a no
    known = explain("cupy-cuda13x==14.2.0", *H100)
    assert known["verdict"] == "conditional" and known["reasons"][0]["source"].startswith("https://pypi.org/pypi/cupy-cuda13x/json")
    assert explain("cupy-cuda13x[ctk]==14.2.0", *H100)["verdict"] == "pass"
    # the file list knows packages no documentation page lists any more: cupy-cuda102 lasted until CuPy 12.3.0
    assert explain("cupy-cuda102==12.3.0", None, "7.0", "580.65.06")["verdict"] == "conditional"
    # on a GPU newer than CUDA 10.2's targets CuPy's precompiled kernels may not run: not a verdict either way
    assert explain("cupy-cuda102==12.3.0", *H100)["verdict"] == "uncertain"
    assert explain("cupy-cuda102==13.0.0", *H100)["code"] == "ENV_UNRESOLVABLE"


# -- command-line values: ASCII, whole-string, bounded -----------------------------------------

@pytest.mark.parametrize("args, message", [
    (("torch==2.4.1", None, "\u0668.\u0660", "580.65.06"), "not a compute capability"),   # Arabic-Indic 8.0
    (("torch==2.4.1", None, "8.0\n", "580.65.06"), "not a compute capability"),
    (("torch==2.4.1", None, "8.0", "580.65.06\n"), "not a driver version"),
    (("torch==2.4.1", None, "8.0", "\u0665\u0663\u0665.104.05"), "not a driver version"),
    (("torch==2.4.1", None, "8.0", "580.65.06", "3.11\n"), "not a Python version"),
    (("torch==2.4.1", None, "8.0", "580.65.06", "3.5"), "not a Python version"),  # 3.6 and 3.7 are questions now (issue 24)
    (("torch==2.4.1", None, "8.0", "580.65.06", "3.16"), "not a Python version"),
    (("torch==2.4.1", None, "8.0", "580.65.06", "3.\u0661\u0661"), "not a Python version"),
    (("torch==" + "9" * 5000, None, "8.0", "580.65.06"), "characters long"),
    (("torch==" + "1." * 40 + "1", None, "8.0", "580.65.06"), "at most 64 characters"),
])
def test_explain_refuses_bad_values_in_one_sentence(args, message):
    with pytest.raises(UserError, match=message) as caught:
        explain(*args)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


def test_non_ascii_digits_exit_2_not_3():
    proc = run_cli("explain", "torch==2.4.1", "--cc", "\u0668.\u0660", "--driver", "580.65.06")
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr


def _regex_problems(path: Path) -> list[str]:
    """re.match calls, and string constants with \\d or ending in $ (regex sources), in one file."""
    problems = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "match" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re":
            problems.append(f"{path.name}:{node.lineno} re.match")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and ("\\d" in node.value or node.value.endswith("$")):
            problems.append(f"{path.name}:{node.lineno} {node.value!r}")
    return problems


def test_validation_regexes_are_whole_string_and_ascii():
    files = [*sorted((REPO / "src/gpucompat/knowledge").glob("*.py")), *sorted((REPO / "src/gpucompat/envs").glob("*.py"))]
    assert [p for f in files for p in _regex_problems(f)] == []


# -- env = "current": the interpreter's metadata and the framework's kernels, read once --------

def test_installed_scans_the_metadata_once_per_process(monkeypatch):
    calls = []
    real = current.os.listdir
    monkeypatch.setattr(current.os, "listdir", lambda *a, **k: calls.append(1) or real(*a, **k))
    current._installed_versions.cache_clear()
    try:
        for _ in range(50):
            for framework in ("torch", "jax", "cupy", "tensorflow", "cuda-runtime"):
                current.installed(framework)
        assert 0 < len(calls) <= len(sys.path)  # one listing of each sys.path entry, once
    finally:
        current._installed_versions.cache_clear()


def test_installed_versions_from_folder_names_equal_importlib_metadatas():
    """The dist-info names say what each METADATA file says (read only where a name cannot)."""
    current._installed_versions.cache_clear()
    try:
        expected = {d.metadata["Name"].lower().replace("_", "-").replace(".", "-"): d.version
                    for d in metadata.distributions() if d.metadata["Name"]}
        assert current._installed_versions() == expected
    finally:
        current._installed_versions.cache_clear()


def test_installed_archs_reads_the_binaries_once_per_framework(monkeypatch):
    inspected = []
    monkeypatch.setattr(fatbin.metadata, "distribution", lambda name: name)
    monkeypatch.setattr(fatbin, "inspect", lambda name: inspected.append(name) or {"sass": ["sm_80"], "ptx": ["compute_90"]})
    fatbin._installed_archs.cache_clear()
    try:
        first = fatbin.installed_archs("torch")
        first[0].append("sm_999")  # a caller's change must not leak into the cache
        for _ in range(20):
            assert fatbin.installed_archs("torch") == (["sm_80"], ["compute_90"], "gpucompat inspect torch (fat binaries of the installed build)")
        assert inspected == ["torch"]
    finally:
        fatbin._installed_archs.cache_clear()
