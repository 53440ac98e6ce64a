"""`gpucompat advise FRAMEWORK --pool`: what a site publishes (issue 39 section 5): the fewest install lines such that every
class gets the newest release that runs on it, classes sharing it on one line; the classes that hold the site back and the
driver change that would give one install; on the plan's own Pythons. The site's classes are examples/plans/site.toml's
(V100 on R470, A100 on R535, H200 on R580, RTX 2080 Ti on R450, B200 on R580), read once as `explain --pool` reads them
(asked.PoolClass, issue 39 section 7); the verdicts are the knowledge rules', checked class by class here."""

import json

from packaging.version import Version

from conftest import REPO, run_cli, write
from gpucompat.answers.advise import advise_for, release_for
from gpucompat.answers.advise_pool import advise_pool
from gpucompat.answers.asked import NEWEST, Asked, read_pool
from gpucompat.answers.explain import ask
from gpucompat.knowledge.rules import PASS, predict_stack, wheel_pythons

SITE = str(REPO / "examples" / "plans" / "site.toml")
ENV = {"COLUMNS": "120"}


def _advise(pool=SITE, framework="torch", rows=(), driver=None, python=None):
    read = read_pool(pool, driver, python)
    python_from = "given" if python else "the plan" if read.plan_pythons else NEWEST
    return advise_pool(framework, read, python_from, (), list(rows)), read


def _runs(framework, version, variant, c, python=None, driver=None):
    return predict_stack(framework, release_for(framework, version, variant), variant, c.cc, driver or c.driver, python,
                         gpu=c.gpu).verdict == PASS


def _own_newest(framework, c, python=None):
    """What `advise` alone answers for the class: its newest predicted release."""
    asked = Asked("advise", framework, None, c.where(), c.driver, None, python, "given" if python else NEWEST, ())
    return advise_for(asked, [], limit=1)["predicted"][0]


def test_every_class_gets_its_own_newest_release_and_classes_that_share_it_share_a_line():
    result, pool = _advise()
    answer = result["answers"][0]
    lines = answer["lines"]
    on_line = {label: line for line in lines for label in line["classes"]}
    assert sorted(on_line) == sorted(c.label for c in pool.classes) and sum(len(line["classes"]) for line in lines) == 5
    for c in pool.classes:  # never a release older than the class's own newest: the release advise gives it alone
        line, own = on_line[c.label], _own_newest("torch", c)
        assert Version(line["version"]) == Version(own["version"]) and _runs("torch", line["version"], line["variant"], c)
    # the site's lines, newest first; 2 of them cannot be merged: the newest of one class does not run on the other's
    assert [Version(line["version"]) for line in lines] == sorted((Version(line["version"]) for line in lines), reverse=True)
    assert len({line["version"] for line in lines}) == len(lines) and len(lines) < 5
    h200_line = on_line["NVIDIA H200"]
    assert on_line["NVIDIA B200"] is h200_line and on_line["Tesla V100-SXM2-32GB"] is on_line["NVIDIA GeForce RTX 2080 Ti"]
    assert h200_line["install"].startswith(f"pip install 'torch=={h200_line['version']}'")
    assert not answer["one_install"]


def test_the_classes_that_hold_the_site_back_and_the_driver_change_that_would_not_or_would_give_one_install(tmp_path):
    result, pool = _advise()
    answer = result["answers"][0]
    top = answer["lines"][0]
    held = {label: h for h in answer["held_back"] for label in h["classes"]}
    assert set(held) == {c.label for c in pool.classes} - set(top["classes"])
    by_label = {c.label: c for c in pool.classes}
    for label, h in held.items():  # the driver named runs the newest line there; the V100 (sm_70) has none
        if h["driver_change"]:
            assert _runs("torch", top["version"], top["variant"], by_label[label], top["python"], h["driver_change"])
    assert held["Tesla V100-SXM2-32GB"]["driver_change"] is None and not answer["driver_change_gives_one_install"]
    assert held["NVIDIA GeForce RTX 2080 Ti"]["driver_change"]
    # where a driver change alone would give one install: an A100 on R535 beside an H100 on R580
    plan = write(tmp_path / "two.toml", 'name = "t"\nexecutor = "slurm"\n'
                 '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ndriver = "535.104.05"\ngres = "a100"\n'
                 '[[targets]]\nname = "NVIDIA H100 80GB HBM3"\ndriver = "580.65.06"\ngres = "h100"\n'
                 '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    two, _ = _advise(str(plan))
    answer = two["answers"][0]
    assert len(answer["lines"]) == 2 and answer["held_back"][0]["classes"] == ["NVIDIA A100-SXM4-80GB"]
    assert answer["driver_change_gives_one_install"] and answer["held_back"][0]["driver_change"]
    text = run_cli("advise", "torch", "--pool", str(plan), env=ENV, check=0).stdout
    flat = " ".join(text.split())
    assert "The driver changes below would give one install for all" in flat
    assert f"driver {answer['held_back'][0]['driver_change']} or newer" in flat


def test_classes_that_share_their_newest_release_get_one_install_line(tmp_path):
    plan = write(tmp_path / "same.toml", 'name = "s"\nexecutor = "slurm"\n'
                 '[[targets]]\nname = "NVIDIA H100 80GB HBM3"\ndriver = "580.65.06"\ngres = "h100"\n'
                 '[[targets]]\nname = "NVIDIA H200"\ndriver = "580.159.04"\ngres = "h200"\n'
                 '[[targets]]\nname = "NVIDIA H100 80GB HBM3"\ndriver = "580.65.06"\ngres = "h100b"\nfeatures = ["ib"]\n'
                 '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    result, _ = _advise(str(plan))
    answer = result["answers"][0]
    assert answer["one_install"] and len(answer["lines"]) == 1 and len(answer["lines"][0]["classes"]) == 3 and not answer["held_back"]
    text = " ".join(run_cli("advise", "torch", "--pool", str(plan), env=ENV, check=0).stdout.split())
    assert f"One install serves every class: torch=={answer['lines'][0]['version']}" in text


def test_the_answer_is_on_the_plans_pythons_and_never_on_another(tmp_path):
    plan = write(tmp_path / "py.toml", 'name = "p"\nexecutor = "slurm"\npython = ["3.10", "3.11"]\n'
                 '[[targets]]\nname = "NVIDIA H100 80GB HBM3"\ndriver = "580.65.06"\ngres = "h100"\n'
                 '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ndriver = "535.104.05"\ngres = "a100"\n'
                 '[[stacks]]\nframework = "jax"\nversions = ["0.4.30"]\n')
    data = json.loads(run_cli("advise", "jax", "--pool", str(plan), "--json", env=ENV, check=0).stdout)
    assert data["pythons"] == ["3.10", "3.11"] and [a["python"] for a in data["answers"]] == ["3.10", "3.11"]

    def pythons_in(value):
        if isinstance(value, dict):
            return [v for k, v in value.items() if k == "python" and v] + [p for v in value.values() for p in pythons_in(v)]
        return [p for v in value for p in pythons_in(v)] if isinstance(value, list) else []

    assert set(pythons_in(data["answers"])) == {"3.10", "3.11"}  # no line on a Python the plan does not list
    for answer in data["answers"]:
        for line in answer["lines"]:  # each line has wheels for its Python
            assert answer["python"] in wheel_pythons("jax", release_for("jax", line["version"], line["variant"]), line["variant"])
    text = run_cli("advise", "jax", "--pool", str(plan), env=ENV, check=0).stdout
    assert "Python 3.10" in text and "Python 3.11" in text and "Python 3.12" not in text and "Python 3.13" not in text
    given = json.loads(run_cli("advise", "jax", "--pool", str(plan), "--python", "3.12", "--json", env=ENV, check=0).stdout)
    assert given["pythons"] == ["3.12"] and set(pythons_in(given["answers"])) == {"3.12"}
    explained = json.loads(run_cli("explain", "jax[cuda12]==0.4.30", "--pool", str(plan), "--json", env=ENV, check=0).stdout)
    assert (explained["python"], explained["python_from"]) == ("3.10", "the plan")  # explain --pool too: the plan's, not the newest
    assert any("it also lists 3.11" in note for note in explained["notes"])


def _cell(line, c, **extra):
    return {"framework": "torch", "variant": line["variant"], "version": line["version"], "cc": c.cc, "sweep": 3, "cell": 9,
            "python": line["python"], "gpu": c.name, "driver": c.driver, "warnings": [], "env": "uv", "stage": "compute",
            "cuda_runtime": None, "observed": True, "verified": True, "created_at": 1.0, **extra}


def test_a_sweeps_failure_on_a_class_rules_its_newest_out_and_its_pass_is_said_observed():
    first, pool = _advise()
    h200 = next(c for c in pool.classes if c.label == "NVIDIA H200")
    line = next(line for line in first["answers"][0]["lines"] if "NVIDIA H200" in line["classes"])
    refuted, _ = _advise(rows=[_cell(line, h200, code="CRASHED")])
    now = next(line for line in refuted["answers"][0]["lines"] if "NVIDIA H200" in line["classes"])
    assert (now["version"], now["variant"]) != (line["version"], line["variant"])
    seen, _ = _advise(rows=[_cell(line, h200, code="PASS")])
    now = next(line for line in seen["answers"][0]["lines"] if "NVIDIA H200" in line["classes"])
    assert (now["version"], now["variant"]) == (line["version"], line["variant"]) and now["observed_on"] == ["NVIDIA H200"]


def test_only_a_sweep_of_that_very_class_decides_for_it():
    """A cell of another driver branch, a prediction stored beside a sweep, a row imported unverified or another GPU of
    the same compute capability says nothing of the class: the rules judge it as if no sweep had run."""
    first, pool = _advise()
    h200 = next(c for c in pool.classes if c.label == "NVIDIA H200")
    line = next(line for line in first["answers"][0]["lines"] if "NVIDIA H200" in line["classes"])
    for other in ({"driver": "550.54.15"}, {"observed": False}, {"verified": False}, {"gpu": "NVIDIA H100 80GB HBM3"}):
        again, _ = _advise(rows=[_cell(line, h200, code="CRASHED", **other)])
        now = next(x for x in again["answers"][0]["lines"] if "NVIDIA H200" in x["classes"])
        assert (now["version"], now["variant"]) == (line["version"], line["variant"]) and now["observed_on"] == [], other


def test_the_command_line_prints_every_line_and_change_and_refuses_what_does_not_fit(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path), **ENV}
    data = json.loads(run_cli("advise", "torch", "--pool", SITE, "--json", env=env, check=0).stdout)
    answer = data["answers"][0]
    text = run_cli("advise", "torch", "--pool", SITE, env=env, check=0).stdout
    flat = " ".join(text.split())
    assert "For the whole site" not in text and "hold the site back" in flat and "sbatch --gres=gpu:b200:1" in text
    for line in answer["lines"]:  # text says every line and every driver change JSON has
        assert line["install"] in text
    for h in answer["held_back"]:
        assert (f"driver {h['driver_change']} or newer" if h["driver_change"] else "no driver the knowledge names") in flat
    refused = run_cli("advise", "torch", "--pool", SITE, "--gpu", "A100", env=env, check=2)
    assert "without --gpu" in refused.stderr and "Traceback" not in refused.stderr
    missing = run_cli("advise", "torch", "--pool", str(tmp_path / "nope.toml"), env=env, check=2)
    assert "neither a pool" in missing.stderr


def test_a_class_named_without_cc_is_read_as_with_it(tmp_path):
    """issue 39 section 7: a GTX 1080 on R470 named without cc was judged without its compute capability when explain
    --pool chose CuPy's build (cupy-cuda12x, 0 of 1 pass), and with it when the plan said cc = "6.1" (cupy-cuda11x)."""
    body = ('name = "g"\nexecutor = "slurm"\n[[targets]]\nname = "NVIDIA GeForce GTX 1080"\ndriver = "470.82.01"\ngres = "gtx1080"\n{cc}'
            '[[stacks]]\nframework = "cupy"\nversions = ["13.3.0"]\n')
    answers = []
    for name, cc in (("bare.toml", ""), ("with-cc.toml", 'cc = "6.1"\n')):
        plan = write(tmp_path / name, body.format(cc=cc))
        result = ask("cupy==13.3.0", None, str(plan), None, None, None, None, None, [])
        answers.append((result["spec"], result["passing"], [(c["cc"], c["verdict"], c["code"]) for c in result["classes"]]))
    # cupy-cuda11x brings no NVRTC: conditional on the system's CUDA 11.x toolkit (issue 40.3), read alike both ways
    assert answers[0] == answers[1] and answers[0][2][0] == ("6.1", "conditional", "NEEDS_SYSTEM_CUDA")


def test_explain_pool_prints_every_nearest_yes_its_json_has_driver_changes_included(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path), **ENV}
    data = json.loads(run_cli("explain", "torch==2.11.0", "--pool", SITE, "--json", env=env, check=0).stdout)
    text = " ".join(run_cli("explain", "torch==2.11.0", "--pool", SITE, env=env, check=0).stdout.split())
    rtx = next(c for c in data["classes"] if c["name"] == "NVIDIA GeForce RTX 2080 Ti")
    assert any(n["kind"] == "driver" for n in rtx["nearest"])
    for c in data["classes"]:
        for item in c["nearest"]:
            assert (f"driver {item['driver']} or newer makes {item['spec']} pass" if item["kind"] == "driver" else item["spec"]) in text


def test_format_md_and_html_give_the_paragraph_a_site_pastes_with_every_value_escaped(tmp_path):
    plan = write(tmp_path / "site.toml", 'name = "s"\nexecutor = "slurm"\n'
                 '[[targets]]\nname = "NVIDIA H100 80GB HBM3 <script>alert(1)</script>"\ncc = "9.0"\ndriver = "580.65.06"\ngres = "h100"\n'
                 '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ndriver = "535.104.05"\ngres = "a100"\n'
                 '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    env = {"XDG_DATA_HOME": str(tmp_path), **ENV}
    data = json.loads(run_cli("advise", "torch", "--pool", str(plan), "--json", env=env, check=0).stdout)
    lines = data["answers"][0]["lines"]
    md = run_cli("advise", "torch", "--pool", str(plan), "--format", "md", env=env, check=0).stdout
    assert md.startswith("### torch on the 2 GPU classes of") and all(f"`{line['install']}`" in md for line in lines)
    assert "hold the site back" in md and "\\<script\\>" in md
    html = run_cli("advise", "torch", "--pool", str(plan), "--format", "html", env=env, check=0).stdout
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert all(f"<code>{line['install'].replace(chr(39), '&#x27;')}</code>" in html for line in lines)
    alone = run_cli("advise", "torch", "--gpu", "A100", "--driver", "535.104.05", "--format", "md", env=env, check=2)
    assert "with --pool" in alone.stderr and "Traceback" not in alone.stderr
    conda = run_cli("advise", "torch", "--pool", str(plan), "--format", "conda", env=env, check=2)
    assert "without --pool" in conda.stderr
