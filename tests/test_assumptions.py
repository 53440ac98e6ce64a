"""Every assumption said, and the nearest yes a person takes (issue 29, parts 5, 6 and 8), through the real CLI.

The Python judged (given; this interpreter's for a question about this machine; for one about another, the newest the
release has wheels for) is in the text and the JSON; a bare driver branch is read as the first release of it the
knowledge names and said so; the headline is the cause pip cannot fix before one it can; a PASS prints its install line; a build that needs the system's CUDA libraries is conditional
(its own verdict, code, exit code 5); an empty advise says why and what would work; beside the newest stack that
works, the smallest change from what was asked; the question is read before the store is asked anything.
"""

from __future__ import annotations

import json
import re
import sys

from conftest import run_cli, write

from gpucompat.answers.asked import read
from gpucompat.report.answers import VERDICT_STYLE, verdict_text

WIDTH = {"COLUMNS": "100"}
HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def joined(text: str) -> str:
    return " ".join(text.split())


def explain_json(*args: str) -> dict:
    return json.loads(run_cli("explain", *args, "--json", check=0).stdout)


def advise_json(*args: str, db) -> dict:
    return json.loads(run_cli("advise", *args, "--db", f"sqlite:///{db}", "--json", check=0).stdout)


# -- the Python ----------------------------------------------------------------------------------

def test_the_python_judged_is_in_the_json_and_the_text_and_says_where_it_came_from():
    assumed = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05")  # another machine: the newest with wheels
    assert (assumed["target"]["python"], assumed["target"]["python_from"]) == ("3.12", "newest with wheels")
    assert (f"Python 3.12: the newest torch==2.4.1 has Linux x86_64 wheels for, assumed because the question is about another "
            f"machine (--gpu, --cc, --driver or --pool), not this interpreter's {HERE} (give --python X.Y for another)") in assumed["notes"]
    assert any(r["rule"] == "wheel for this Python" and "3.12" in r["text"] for r in assumed["reasons"])  # judged, not only named
    given = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--python", "3.10")
    assert (given["target"]["python"], given["target"]["python_from"]) == ("3.10", "given") and given["notes"] == []
    text = run_cli("explain", "torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--python", "3.10", env=WIDTH, check=0).stdout
    assert "torch==2.4.1 on compute capability 8.0, driver 535.104.05 (CUDA 12.2), Python 3.10: PASS" in joined(text)


def test_a_python_that_rules_out_every_build_judges_the_build_the_gpu_would_run_and_adds_no_false_requirement():
    """jax==0.11.2 has no wheel for 3.11: the answer is that Python, never jax[cuda13]'s 'needs driver >= 580'."""
    data = explain_json("jax==0.11.2", "--gpu", "RTX 4090", "--driver", "550.54.14", "--python", "3.11")
    assert (data["spec"], data["verdict"], data["code"]) == ("jax[cuda12]==0.11.2", "fail", "ENV_UNRESOLVABLE")
    assert not any("580" in r["text"] for r in data["reasons"]), data["reasons"]
    assert "jax[cuda12]==0.11.2 is the build this GPU and driver would run; it is the Python 3.11 that rules it out" in data["notes"]
    python = next(n for n in data["nearest"] if n["kind"] == "python")
    assert (python["python"], python["pythons"][0], python["install"]) == ("3.12", "3.12", None)
    older = data["nearest"][0]
    assert (older["kind"], older["spec"]) == ("older", "jax[cuda12]==0.10.2")  # the nearest release with a 3.11 wheel
    with_312 = explain_json("jax==0.11.2", "--gpu", "RTX 4090", "--driver", "550.54.14", "--python", "3.12")
    assert (with_312["spec"], with_312["verdict"]) == ("jax[cuda12]==0.11.2", "pass")


def test_an_old_python_gets_the_newest_release_that_runs_with_it():
    data = explain_json("jax==0.11.2", "--gpu", "RTX 4090", "--driver", "550", "--python", "3.9")
    assert ("older", "jax[cuda12]==0.4.30") in [(n["kind"], n["spec"]) for n in data["nearest"]]
    assert data["nearest"][0]["install"]["pip"] == "pip install 'jax[cuda12]==0.4.30'"


def test_an_empty_advise_says_why_and_what_would_work(tmp_path):
    db = tmp_path / "empty.db"
    old = advise_json("jax", "--gpu", "RTX 4090", "--driver", "550", "--python", "3.9", db=db)
    assert [(p["version"], p["variant"]) for p in old["predicted"]] == [("0.4.30", "cuda12")]  # the 0.4 series' release with 3.9 wheels
    none = advise_json("jax", "--gpu", "RTX 4090", "--driver", "550", "--python", "3.7", db=db)
    assert none["predicted"] == [] and none["empty"].startswith("No jax release the knowledge holds is predicted to run on")
    assert "lacks wheels for Python 3.7" in none["empty"] and "jax[cuda12]==0.12.0.1 would run with Python 3.12 to 3.15" in none["empty"]  # the newest jax the tables include (newest_releases.csv: 0.12)
    text = run_cli("advise", "jax", "--gpu", "RTX 4090", "--driver", "550", "--python", "3.7", "--db", f"sqlite:///{db}", env=WIDTH, check=0)
    assert none["empty"] in joined(text.stdout) and "┏" not in text.stdout  # a sentence, not an empty table
    old_driver = advise_json("torch", "--gpu", "V100", "--driver", "384.81", "--python", "3.6", db=db)
    if not old_driver["predicted"]:
        assert old_driver["empty"]  # whatever the reason, never an empty list alone


def test_torch_1_12_on_the_k80_nodes_is_judged_on_a_python_it_has_wheels_for_not_this_laptops():
    """Issue 35 item 6: the question is whether torch 1.12.1 runs on the K80 nodes (with Python <= 3.10 it does)."""
    data = explain_json("torch==1.12.1", "--gpu", "Tesla K80", "--driver", "470.82.01")
    assert (data["verdict"], data["code"], data["target"]["python"], data["target"]["python_from"]) == ("pass", None, "3.10", "newest with wheels")
    assert any(n.startswith("Python 3.10: the newest torch==1.12.1 has Linux x86_64 wheels for, assumed because the question is about "
                            "another machine") for n in data["notes"])
    text = joined(run_cli("explain", "torch==1.12.1", "--gpu", "Tesla K80", "--driver", "470.82.01", env=WIDTH, check=0).stdout)
    assert "torch==1.12.1 on Tesla K80 (CC 3.7), driver 470.82.01 (CUDA 11.4), Python 3.10: PASS" in text
    # R535 does not drive Kepler: that is the headline, whatever the Python (a wheel is pip's to fix, the driver is not)
    for python in ((), ("--python", "3.11")):
        r535 = explain_json("torch==1.12.1", "--gpu", "Tesla K80", "--driver", "535", *python)
        assert (r535["verdict"], r535["code"], r535["stage"]) == ("fail", "NO_DEVICE", "device"), r535
        assert r535["reasons"][0]["rule"] == "driver drives the GPU" and "does not drive Kepler" in r535["reasons"][0]["text"]
    assert "FAIL NO_DEVICE at device" in joined(run_cli("explain", "torch==1.12.1", "--gpu", "Tesla K80", "--driver", "535", "--python",
                                                         "3.11", env=WIDTH, check=0).stdout)


def test_a_python_given_is_judged_as_given_even_about_another_machine():
    data = explain_json("torch==1.12.1", "--gpu", "Tesla K80", "--driver", "470.82.01", "--python", "3.11")
    assert (data["target"]["python"], data["target"]["python_from"], data["code"]) == ("3.11", "given", "ENV_UNRESOLVABLE")
    assert not any(n.startswith("Python") for n in data["notes"])
    assert ("another Python", "3.10") in [(n["label"], n.get("python")) for n in data["nearest"]]


def test_a_driver_too_old_heads_a_missing_wheel():
    """torch 2.4.1 (cu121) with driver 470 and Python 3.7: the driver is the cause pip cannot fix, so it comes first."""
    data = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "470.82.01", "--python", "3.7")
    assert (data["code"], data["stage"]) == ("DRIVER_TOO_OLD", "device")
    assert {r["rule"] for r in data["reasons"] if r["verdict"] == "fail"} == {"driver vs CUDA runtime", "wheel for this Python"}


def test_a_question_about_this_machine_uses_this_interpreters_python(monkeypatch):
    from gpucompat.answers import target
    from gpucompat.answers.explain import explain

    monkeypatch.setattr(target, "this_machine", lambda: {"gpu": "NVIDIA A100-SXM4-80GB", "cc": "8.0", "driver": "535.104.05",
                                                          "source": "NVML", "classes": 1, "index": 0})
    here = explain("torch==2.4.1")
    assert (here["target"]["python"], here["target"]["python_from"]) == (HERE, "this interpreter")
    assert f"Python {HERE}: this interpreter's, as a sweep assumes (give --python X.Y to ask about another)" in here["notes"]
    elsewhere = explain("torch==2.4.1", driver="550.54.15")  # this GPU with another driver: another machine's question
    assert elsewhere["target"]["python_from"] == "newest with wheels"


def test_advise_about_another_machine_judges_each_release_on_its_newest_python(tmp_path):
    data = advise_json("torch", "--gpu", "Tesla K80", "--driver", "470.82.01", db=tmp_path / "empty.db")
    assert (data["target"]["python"], data["target"]["python_from"]) == (None, "newest with wheels")
    assert all(p["python"] for p in data["predicted"]) and data["predicted"][0]["version"] == "2.7.1"
    assert f"Python {HERE} is this interpreter's, which says nothing of another machine (--gpu, --cc, --driver or --pool): each release " \
        "is judged on the newest Python it has Linux x86_64 wheels for (give --python X.Y for one)" in data["notes"]


# -- a PASS and its install command --------------------------------------------------------------

def test_every_pass_prints_its_install_command_in_text_and_json():
    for args, pip in ((("torch==2.4.1+cu118", "--gpu", "V100", "--driver", "470.82.01", "--python", "3.11"),
                       "pip install 'torch==2.4.1' --index-url https://download.pytorch.org/whl/cu118"),
                      (("jax==0.4.30", "--gpu", "H100 PCIe", "--driver", "535.104.05", "--python", "3.12"), "pip install 'jax[cuda12]==0.4.30'"),
                      (("torch==1.12.1", "--gpu", "Tesla K80", "--driver", "470.82.01"), "pip install 'torch==1.12.1'")):
        data = explain_json(*args)
        assert data["verdict"] == "pass" and data["install"]["pip"] == pip and data["install"]["uv"] == "uv " + pip
        out = run_cli("explain", *args, env=WIDTH, check=0).stdout.splitlines()
        assert out[out.index("Install:") + 1] == "    " + pip
    failing = explain_json("torch==2.4.1", "--gpu", "V100", "--driver", "470.82.01", "--python", "3.11")
    assert failing["verdict"] == "fail" and "install" not in failing


# -- the driver ----------------------------------------------------------------------------------

def test_a_bare_driver_branch_is_read_as_its_first_named_release_and_said():
    from gpucompat.knowledge import tables
    from gpucompat.knowledge.rules import branch_releases

    data = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "550", "--python", "3.11")
    t = data["target"]
    assert (t["driver"], t["driver_typed"], t["driver_cuda"]) == ("550.54.14", "550", "12.4")  # was read below R550, as CUDA 12.3
    assert any(n.startswith("driver 550 read as 550.54.14, the first release of branch R550 the knowledge names (CUDA 12.4")
               for n in data["notes"])
    # 'first' is the oldest release of the branch the knowledge names, where it names more than one
    assert branch_releases(450) == ["450.36.06", "450.80.02"] and "450.80.02" in tables.named_drivers()
    r450 = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "450", "--python", "3.11")
    assert r450["target"]["driver"] == "450.36.06"
    assert any(n.startswith("driver 450 read as 450.36.06, the first release of branch R450 the knowledge names") for n in r450["notes"])
    r525 = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "525", "--python", "3.11")["target"]
    assert (r525["driver"], r525["driver_cuda"]) == ("525.60.13", "12.0")  # R525 is CUDA 12.0; read below it, it was 11.8
    unnamed = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "565", "--python", "3.11")
    assert unnamed["target"]["driver"] == "565" and any("the knowledge names no release of branch R565" in n for n in unnamed["notes"])
    full = explain_json("torch==2.4.1", "--cc", "8.0", "--driver", "550.54.15", "--python", "3.11")
    assert full["target"]["driver"] == full["target"]["driver_typed"] == "550.54.15" and not any(n.startswith("driver") for n in full["notes"])


# -- builds that need the system's CUDA ----------------------------------------------------------

def test_tensorflow_before_and_cuda_is_conditional_in_text_json_and_exit_code():
    args = ("tensorflow==2.11.0", "--gpu", "T4", "--driver", "525.60.13", "--python", "3.10")
    data = explain_json(*args)
    assert (data["verdict"], data["code"]) == ("conditional", "NEEDS_SYSTEM_CUDA")
    assert (data["needs"]["cuda"], data["needs"]["cudnn"]) == ("11.2", "8.1")
    assert next(r for r in data["reasons"] if r["rule"] == "CUDA libraries")["verdict"] == "conditional"
    assert all(n["verdict"] == "pass" for n in data["nearest"]) and data["nearest"], data["nearest"]  # only self-contained fixes
    proc = run_cli("explain", *args, "--exit-code", env=WIDTH)
    assert proc.returncode == 5
    text = joined(proc.stdout)
    assert "Python 3.10: CONDITIONAL NEEDS_SYSTEM_CUDA" in text and "needs: CUDA 11.2 and cuDNN 8.1 installed on the system" in text
    assert ": PASS" not in text
    assert VERDICT_STYLE["conditional"] not in ("green", VERDICT_STYLE["pass"]) and verdict_text("conditional").style == VERDICT_STYLE["conditional"]
    on_311 = explain_json("tensorflow==2.11.0", "--gpu", "T4", "--driver", "525.60.13", "--python", "3.11")  # no 3.11 wheel
    python = next(n for n in on_311["nearest"] if n["kind"] == "python")
    assert (on_311["code"], python["python"], python["verdict"], python["needs"]["cuda"]) == ("ENV_UNRESOLVABLE", "3.10", "conditional", "11.2")
    self_contained = explain_json("tensorflow[and-cuda]==2.15.1", "--gpu", "T4", "--driver", "535.104.05", "--python", "3.10")
    assert (self_contained["verdict"], self_contained.get("needs")) == ("pass", None)


def test_plain_tensorflow_in_a_file_is_conditional_for_both_eras(tmp_path):
    for pin, cuda in (("tensorflow==2.15.0", "12.2"), ("tensorflow==2.11.0", "11.2")):
        path = write(tmp_path / "requirements.txt", pin + "\n")
        data = explain_json("-r", str(path), "--gpu", "T4", "--driver", "535.104.05", "--python", "3.10")
        row = data["rows"][0]
        assert (data["verdict"], row["verdict"], row["code"], row["needs"]["cuda"]) == ("conditional", "conditional", "NEEDS_SYSTEM_CUDA", cuda)
        assert row["reason"].startswith(f"it needs CUDA {cuda} and cuDNN")


def test_advise_ranks_self_contained_builds_first_with_exact_versions_for_every_framework(tmp_path):
    db = tmp_path / "empty.db"
    tf = advise_json("tensorflow", "--gpu", "T4", "--driver", "470.82.01", "--python", "3.10", db=db)
    kinds = [p["verdict"] for p in tf["predicted"]]
    assert kinds[0] == "pass" and "conditional" in kinds and kinds == sorted(kinds, key=lambda k: k == "conditional")
    first_conditional = next(p for p in tf["predicted"] if p["verdict"] == "conditional")
    assert first_conditional["variant"] == "plain" and first_conditional["needs"]["text"].startswith("CUDA 11.")
    assert first_conditional["version"] == "2.13.1"  # the newest 2.13.z the knowledge holds, never 2.13.*
    for framework in ("torch", "tensorflow", "jax", "cupy", "cuda-runtime"):
        data = advise_json(framework, "--gpu", "T4", "--driver", "535.104.05", "--python", "3.10", db=db)
        assert data["predicted"], framework
        for item in data["predicted"]:
            assert re.fullmatch(r"[0-9]+(\.[0-9]+)+", item["version"]), (framework, item["version"])
            # cuda-runtime's release is a CUDA minor (12.9): its wheels' pip line may take any 12.9.z of NVIDIA's numbering
            assert framework == "cuda-runtime" or (".*" not in item["install"] and ".*" not in item["commands"]["pip"]), item


# -- the nearest yes a person takes --------------------------------------------------------------

def test_beside_the_newest_the_smallest_step_that_works():
    data = explain_json("torch==2.6.0", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--python", "3.11")
    assert data["code"] == "ARCH_UNSUPPORTED"
    kinds = [(n["kind"], n["spec"]) for n in data["nearest"]]
    assert kinds[0] == ("newer", "torch==2.7.0+cu128") and kinds[1][0] == "newest" and kinds[1][1] != kinds[0][1]
    assert data["nearest"][0]["install"]["pip"] == "pip install 'torch==2.7.0' --index-url https://download.pytorch.org/whl/cu128"
    text = run_cli("explain", "torch==2.6.0", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--python", "3.11",
                   env=WIDTH, check=0).stdout
    assert "nearest newer torch==2.7.0+cu128 passes" in joined(text)
    assert "    pip install 'torch==2.7.0' --index-url https://download.pytorch.org/whl/cu128" in text.splitlines()


def test_a_requirements_file_and_a_pool_give_the_smallest_step_per_package_and_per_class(tmp_path):
    path = write(tmp_path / "requirements.txt", "torch==2.6.0\n")
    data = explain_json("-r", str(path), "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--python", "3.11")
    assert [(n["kind"], n["spec"]) for n in data["nearest"]["torch==2.6.0"]][0] == ("newer", "torch==2.7.0+cu128")
    plan = write(tmp_path / "site.toml", 'name = "site"\nexecutor = "slurm"\n'
                 '[[targets]]\nname = "NVIDIA B200"\ncc = "10.0"\ndriver = "580.65.06"\ngres = "b200"\n'
                 '[[targets]]\nname = "NVIDIA H200"\ncc = "9.0"\ndriver = "580.159.04"\ngres = "h200"\n'
                 '[[stacks]]\nframework = "torch"\nversions = ["2.4.1"]\n')
    pool = explain_json("torch==2.4.1", "--pool", str(plan), "--python", "3.11", "--db", f"sqlite:///{tmp_path / 'e.db'}")
    b200, h200 = pool["classes"]
    assert b200["verdict"] == "fail" and (b200["nearest"][0]["kind"], b200["nearest"][0]["spec"]) == ("newer", "torch==2.7.0+cu128")
    assert h200["verdict"] == "pass" and h200["nearest"] == []
    text = run_cli("explain", "torch==2.4.1", "--pool", str(plan), "--python", "3.11", "--db", f"sqlite:///{tmp_path / 'e.db'}",
                   env={"COLUMNS": "140"}, check=0).stdout
    assert "NVIDIA B200, driver 580.65.06: nearest newer torch==2.7.0+cu128" in joined(text)


# -- one question, read once ---------------------------------------------------------------------

def test_the_question_is_read_before_the_store_is_asked(tmp_path):
    """A store that cannot be opened is never reached by a question that cannot be read: the sentence is the question's."""
    unreachable = "postgresql://127.0.0.1:1/none"
    proc = run_cli("explain", "torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--python", "2.7", "--db", unreachable, check=2)
    assert "--python '2.7' is not a Python version" in proc.stderr and "database" not in proc.stderr
    proc = run_cli("advise", "torch", "--cc", "8.x", "--driver", "535.104.05", "--db", unreachable, check=2)
    assert "--cc" in proc.stderr and "database" not in proc.stderr


def test_one_asked_object_carries_the_whole_question():
    asked = read("jax 0.4.30", None, None, None, "9.0", "535", "3.12")
    assert (asked.mode, asked.framework, asked.stack.version, asked.driver, asked.driver_typed, asked.python, asked.python_from) == \
        ("stack", "jax", "0.4.30", "535.54.03", "535", "3.12", "given")  # R535's first named release
    assert asked.target["cc"] == "9.0" and asked.target["driver_cuda"] == "12.2"
    assert asked.target_view()["python"] == "3.12" and any(n.startswith("driver 535 read as 535.54.03") for n in asked.notes)
