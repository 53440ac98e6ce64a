"""`gpucompat advise FRAMEWORK --pool`: the newest release for every GPU class of a site, then per class (issue 36 item 4).
The site's classes are examples/plans/site.toml's (V100 on R470, A100 on R535, H200 on R580, RTX 2080 Ti on R450, B200
on R580), read as `explain --pool` reads them; the verdicts are the knowledge rules', checked class by class here."""

import json

from packaging.version import Version

from conftest import REPO, run_cli, write
from gpucompat.answers.advise import candidates, release_for, series_releases
from gpucompat.answers.advise_pool import advise_pool
from gpucompat.answers.asked import NEWEST, pool_targets
from gpucompat.knowledge.rules import PASS, predict_stack

SITE = str(REPO / "examples" / "plans" / "site.toml")


def _advise(pool=SITE, framework="torch", rows=(), driver=None, python=None):
    executor, targets, origin = pool_targets(pool)
    return advise_pool(framework, executor, targets, origin, driver, python, "given" if python else NEWEST, (), list(rows)), targets


def _runs(framework, version, variant, target):
    return predict_stack(framework, release_for(framework, version, variant), variant, target.cc, target.driver, None, gpu=target.name).verdict == PASS


def test_the_site_wide_release_runs_on_every_class_and_no_newer_one_does():
    result, targets = _advise()
    site = result["site"]
    assert site["everywhere"] and len(site["runs_on"]) == len(targets) == 5 and not site["left_out"]
    assert all(_runs("torch", site["version"], site["variant"], t) for t in targets)
    assert site["install"].startswith(f"pip install 'torch=={site['version']}'")
    # every candidate newer than it leaves at least one class out (the R450 RTX 2080 Ti and the sm_100 B200 pull apart)
    newer = [(v, var) for series, var in candidates("torch") for v in series_releases("torch", series, var)
             if Version(v).release[:2] > Version(site["version"]).release[:2]]
    assert newer and all(not all(_runs("torch", v, var, t) for t in targets) for v, var in newer[:40])


def test_each_class_gets_its_newest_its_install_line_and_its_scheduler_request():
    result, targets = _advise()
    by_name = {c["name"]: c for c in result["classes"]}
    for target in targets:
        c = by_name[target.name]
        assert c["predicted"] and _runs("torch", c["predicted"]["version"], c["predicted"]["variant"], target)
        assert c["predicted"]["install"].startswith("pip install 'torch==")
        assert c["request"].startswith(f"sbatch --gres=gpu:{target.gres}:1")
    assert "--constraint=hbm" in by_name["NVIDIA A100-SXM4-80GB"]["request"]
    # the B200 needs a build with sm_100 (CUDA 12.8 on), the R450 2080 Ti one of CUDA 11.0 at most: not the same release
    assert by_name["NVIDIA B200"]["predicted"]["version"] != result["site"]["version"]


def test_a_class_nothing_runs_on_says_why_and_the_site_gets_the_release_that_runs_on_most(tmp_path):
    plan = write(tmp_path / "kepler.toml", 'name = "k"\nexecutor = "slurm"\n'
                 '[[targets]]\nname = "Tesla K80"\ncc = "3.7"\ndriver = "550.54.14"\ngres = "k80"\n'
                 '[[targets]]\nname = "NVIDIA A100-SXM4-80GB"\ncc = "8.0"\ndriver = "550.54.14"\ngres = "a100"\n'
                 '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    result, _ = _advise(str(plan))
    k80 = next(c for c in result["classes"] if c["name"] == "Tesla K80")
    assert k80["predicted"] is None and "does not drive" in k80["empty"] and "R470" in k80["empty"]
    site = result["site"]
    assert not site["everywhere"] and site["runs_on"] == ["NVIDIA A100-SXM4-80GB"] and site["left_out"] == ["Tesla K80"]


def test_a_sweeps_failure_on_a_class_outranks_the_rules_and_its_pass_is_said_observed():
    first, targets = _advise()
    site = first["site"]
    v100 = next(t for t in targets if t.cc == "7.0")
    cell = {"framework": "torch", "variant": site["variant"], "version": site["version"], "cc": "7.0", "sweep": 3, "cell": 9,
            "python": "3.8", "gpu": v100.name, "driver": v100.driver, "warnings": [], "env": "uv", "stage": "compute", "cuda_runtime": None}
    refuted, _ = _advise(rows=[{**cell, "code": "CRASHED"}])
    assert (refuted["site"]["version"], refuted["site"]["variant"]) != (site["version"], site["variant"])
    seen, _ = _advise(rows=[{**cell, "code": "PASS"}])
    assert seen["site"]["version"] == site["version"] and seen["site"]["observed_on"] == [v100.name]
    assert next(c for c in seen["classes"] if c["cc"] == "7.0")["observed"]["version"] == site["version"]


def test_the_command_line_prints_the_site_and_refuses_what_does_not_fit(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path), "COLUMNS": "120"}
    data = json.loads(run_cli("advise", "torch", "--pool", SITE, "--json", env=env, check=0).stdout)
    assert data["site"]["everywhere"] and len(data["classes"]) == 5
    text = run_cli("advise", "torch", "--pool", SITE, env=env, check=0).stdout
    assert "For the whole site:" in text and "sbatch --gres=gpu:b200:1" in text
    refused = run_cli("advise", "torch", "--pool", SITE, "--gpu", "A100", env=env, check=2)
    assert "without --gpu" in refused.stderr and "Traceback" not in refused.stderr
    missing = run_cli("advise", "torch", "--pool", str(tmp_path / "nope.toml"), env=env, check=2)
    assert "neither a pool" in missing.stderr


def test_only_a_sweep_of_that_very_class_decides_for_it():
    """A cell of the same compute capability on another driver, a prediction stored beside a sweep, or a row imported
    unverified says nothing of the class: the rules judge it as if no sweep had run."""
    first, targets = _advise()
    site = first["site"]
    v100 = next(t for t in targets if t.cc == "7.0")
    cell = {"framework": "torch", "variant": site["variant"], "version": site["version"], "cc": "7.0", "sweep": 3, "cell": 9,
            "python": "3.8", "gpu": v100.name, "driver": v100.driver, "warnings": [], "env": "uv", "stage": "compute",
            "cuda_runtime": None, "code": "CRASHED"}
    for other in ({"driver": "535.104.05"}, {"observed": False}, {"verified": False}, {"gpu": "Tesla V100-PCIE-16GB"}):
        again, _ = _advise(rows=[{**cell, **other}])
        assert (again["site"]["version"], again["site"]["variant"]) == (site["version"], site["variant"]), other
        assert again["site"]["observed_on"] == []
