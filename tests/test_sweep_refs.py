"""Sweep references that cannot drift (issue 39 section 4): PLAN@latest~N, a bare latest of one plan, --plan,
in one real SQLite store holding two plans' sweeps."""

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
