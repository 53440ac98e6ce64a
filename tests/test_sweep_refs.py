"""Sweep references that cannot drift (issue 39 section 4): PLAN@latest~N, a bare latest of one plan, --plan,
in one real SQLite store holding two plans' sweeps."""

import json

import pytest

from gpucompat import sweep_refs
from gpucompat.errors import UserError
from gpucompat.model import Outcome, ResolvedStack, Stack, Target
from gpucompat.store import Store

PREDICTED = {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}


def stored(store, name, kind="sweep", code="PASS"):
    """A sweep of plan `name` on one H100 class, its one cell judged `code`."""
    resolved = [ResolvedStack(Stack("cuda-runtime", "12.4", "default", "3.12", "uv"), True, cuda_runtime="12.4")]
    sweep = store.create_sweep(name, kind, f'name = "{name}"', f"{name}.toml", {}, [Target("NVIDIA H100 80GB HBM3", "9.0", "550.54.15", count=1)],
                               resolved, lambda r, t: PREDICTED)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome(code, "compute", "ran"), None)
    return sweep


@pytest.fixture
def two_plans(tmp_path):
    """site: sweeps 1, 3 and 6; quick: 2 and 4; a check 5 in between. The newest sweep (6) is site's."""
    store = Store(f"sqlite:///{tmp_path / 'refs.db'}")
    assert [stored(store, name, kind) for name, kind in
            (("site", "sweep"), ("quick", "sweep"), ("site", "sweep"), ("quick", "sweep"), ("check", "check"), ("site", "sweep"))] == [1, 2, 3, 4, 5, 6]
    return store


def test_a_plan_s_latest_counts_only_that_plan_s_sweeps(two_plans):
    store = two_plans
    assert [sweep_refs.resolve(store, ref) for ref in ("site@latest", "site@latest~1", "site@latest~2", "quick@latest", "quick@latest~1")] == [6, 3, 1, 4, 2]
    # bare: the plan of the newest sweep (site), never the sweep just before it whatever its plan (quick's 4)
    assert sweep_refs.resolve_all(store, ["latest~1", "latest"]) == [3, 6]
    assert sweep_refs.resolve(store, "latest~1", plan="quick") == 2
    # a bare latest beside a named plan means that plan
    assert sweep_refs.resolve_all(store, ["quick@latest~1", "latest"]) == [2, 4]
    assert sweep_refs.resolve_all(store, [" 5 ", "2"]) == [5, 2]  # ids, checks included, work as before


def test_a_newer_sweep_of_another_plan_does_not_move_a_plan_s_references(two_plans):
    store = two_plans
    before = sweep_refs.resolve_all(store, ["site@latest~1", "site@latest"])
    stored(store, "quick")  # someone runs another plan into the same store
    assert sweep_refs.resolve_all(store, ["site@latest~1", "site@latest"]) == before == [3, 6]
    assert sweep_refs.resolve_all(store, ["latest~1", "latest"]) == [4, 7]  # the bare pair follows the newest plan, both sides alike


def test_a_plan_file_is_matched_by_the_name_inside_it(two_plans, tmp_path):
    plan = tmp_path / "plans" / "my-site-plan.toml"
    plan.parent.mkdir()
    plan.write_text('name = "site"\ntargets = "local"\n\n[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    assert sweep_refs.resolve(two_plans, f"{plan}@latest~1") == 3
    assert sweep_refs.resolve(two_plans, "latest", plan=str(plan)) == 6
    with pytest.raises(UserError, match="there is no plan file"):
        sweep_refs.resolve(two_plans, str(tmp_path / "gone.toml") + "@latest")


def test_chosen_for_results_and_report(two_plans):
    store = two_plans
    assert sweep_refs.chosen(store, None, None, None) == 6  # as before: the newest sweep
    assert sweep_refs.chosen(store, None, "quick", None) == 4
    assert sweep_refs.chosen(store, "latest~1", "quick", None) == 2
    assert sweep_refs.chosen(store, "5", None, None) == 5
    assert [s["id"] for s in sweep_refs.sweeps_of_plan(store, "quick")] == [2, 4]


def test_each_mistake_is_one_sentence(two_plans):
    store = two_plans
    with pytest.raises(UserError, match=r"no sweep of plan 'nightly' run here is stored in .*; `gpucompat results --list` shows each sweep's plan\."):
        sweep_refs.resolve(store, "nightly@latest")
    with pytest.raises(UserError, match=r"plan 'quick' has 2 sweeps run here in .*, so latest~3 does not exist \(latest~1 is its oldest\)"):
        sweep_refs.resolve(store, "quick@latest~3")
    with pytest.raises(UserError, match="latest~2 does not exist"):
        sweep_refs.resolve(store, "latest~2", plan="quick")
    with pytest.raises(UserError, match="'site' and 'quick'|'quick' and 'site'"):
        sweep_refs.resolve_all(store, ["site@latest", "quick@latest", "latest"])
    with pytest.raises(UserError, match="sweep 2 is of plan 'quick', not 'site'"):
        sweep_refs.resolve(store, "2", plan="site")
    with pytest.raises(UserError, match="there is no sweep 99"):
        sweep_refs.resolve(store, "99")
    for bad in ("newest", "@latest", "latest~", "latest~-1", "site@latest~x", "site@"):
        with pytest.raises(UserError, match="is not a sweep: give a sweep id, latest, latest~N, PLAN@latest or PLAN@latest~N"):
            sweep_refs.resolve(store, bad)


def test_a_store_with_only_a_check_says_how_to_address_it(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    stored(store, "check", "check")
    assert sweep_refs.chosen(store, None, None, None) == 1  # results right after a check shows it
    with pytest.raises(UserError, match=r"no sweep run here is stored in .*; run `gpucompat sweep PLAN` first \(a check is addressed by its id"):
        sweep_refs.resolve(store, "latest")
    with pytest.raises(UserError, match="no sweep of plan 'check'"):
        sweep_refs.resolve(store, "check@latest")


# -- the command line: diff, results and report on one store of two plans ------------------------------------------

def test_diff_compares_one_plan_s_sweeps_however_another_plan_is_run_between(tmp_path):
    from conftest import run_cli

    url = f"sqlite:///{tmp_path / 'routine.db'}"
    store = Store(url)
    stored(store, "site", code="PASS")
    stored(store, "site", code="DRIVER_TOO_OLD")  # this quarter: broken
    stored(store, "quick", code="PASS")  # someone runs another plan into the store afterwards
    for refs in (["site@latest~1", "site@latest"], ["latest~1", "latest", "--plan", "site"]):
        proc = run_cli("diff", *refs, "--db", url, "--json")
        assert proc.returncode == 1, proc.stderr  # the routine's alert still fires
        assert (json.loads(proc.stdout)["before"], json.loads(proc.stdout)["after"]) == (1, 2)
    # bare: the newest sweep's plan (quick), which has one sweep: said, exit 2, never site's sweep 2 against quick's 3
    proc = run_cli("diff", "latest~1", "latest", "--db", url)
    assert proc.returncode == 2 and "plan 'quick' has 1 sweep run here" in proc.stderr and "latest~1 does not exist" in proc.stderr
    proc = run_cli("diff", "nightly@latest~1", "nightly@latest", "--db", url)
    assert proc.returncode == 2 and "no sweep of plan 'nightly'" in proc.stderr and "Traceback" not in proc.stderr


def test_results_and_report_take_a_plan(tmp_path):
    from conftest import run_cli

    url = f"sqlite:///{tmp_path / 'two.db'}"
    store = Store(url)
    stored(store, "site")
    stored(store, "quick")
    assert json.loads(run_cli("results", "--plan", "site", "--db", url, "--json", check=0).stdout)["sweep"]["id"] == 1
    assert json.loads(run_cli("results", "--sweep", "quick@latest", "--db", url, "--json", check=0).stdout)["sweep"]["id"] == 2
    assert json.loads(run_cli("results", "--db", url, "--json", check=0).stdout)["sweep"]["id"] == 2  # as before: the newest
    assert [s["id"] for s in json.loads(run_cli("results", "--list", "--plan", "site", "--db", url, "--json", check=0).stdout)] == [1]
    assert "Plan" in run_cli("results", "--list", "--db", url, env={"COLUMNS": "200"}, check=0).stdout
    html = tmp_path / "site.html"
    assert "(sweep 1)" in run_cli("report", "--plan", "site", "-o", str(html), "--db", url, check=0).stderr
    proc = run_cli("report", "--sweep", "site@latest~1", "-o", str(html), "--db", url)
    assert proc.returncode == 2 and "plan 'site' has 1 sweep run here" in proc.stderr


def test_history_names_the_attempts_that_could_not_be_tested(tmp_path):
    from conftest import run_cli

    url = f"sqlite:///{tmp_path / 'h.db'}"
    store = Store(url)
    stored(store, "site", code="PASS")  # another GPU's cell does not count
    resolved = [ResolvedStack(Stack("torch", "2.4.1", "default", "3.12", "uv"), True, cuda_runtime="12.1")]
    sweep = store.create_sweep("site", "sweep", "", None, {}, [Target("NVIDIA A100-SXM4-80GB", "8.0", "550.54.14", count=1)], resolved,
                               lambda r, t: PREDICTED)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome("UNTESTED", "device", "2 other processes computed on the GPU", {"cause": "gpu-busy"}), None)
    text = run_cli("history", "torch==2.4.1", "--gpu", "NVIDIA A100-SXM4-80GB", "--db", url, env={"COLUMNS": "300"}, check=0).stdout
    assert text.startswith("no stored verdict for torch==2.4.1 on NVIDIA A100-SXM4-80GB: 1 attempt was made but could not be tested: "
                           f"sweep {sweep} on "), text
    assert "gpu-busy (2 other processes computed on the GPU)" in text and "gpucompat sweep --resume ID" in text
    assert run_cli("history", "torch==2.4.1", "--cc", "9.0", "--db", url, check=0).stdout.strip() == \
        "no stored verdict for torch==2.4.1 on compute capability 9.0"


def test_the_routine_s_plans_are_plans_and_its_alerts_name_their_plan():
    """docs/routine.md: each plan it shows is one `sweep` reads, and each diff it runs names a plan on both sides."""
    import re

    from conftest import REPO
    from gpucompat.plan import parse_plan

    text = (REPO / "docs" / "routine.md").read_text(encoding="utf-8")
    assert [parse_plan(block, "routine.md").name for block in re.findall(r"```toml\n(.*?)```", text, re.DOTALL)] == ["site", "site-k8s"]
    diffs = re.findall(r"gpucompat diff (\S+) (\S+)", text)
    assert len(diffs) >= 4
    for before, after in diffs:
        refs = [sweep_refs.parse(ref.strip('"`')) for ref in (before, after)]
        assert all(r.plan is not None for r in refs) and refs[0].plan == refs[1].plan and (refs[0].back, refs[1].back) == (1, 0), (before, after)
