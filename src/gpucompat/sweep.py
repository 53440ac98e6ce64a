"""The pipeline, end to end: plan -> targets, stacks -> resolve -> cells -> executor -> verdicts.

`start` does the submit side (no GPU needed) and stores every cell before any job
runs; `run` executes whatever cells of a sweep have no verdict yet, so resuming an
interrupted sweep is the same call.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from . import analysis, env_cache, space
from .discover import local as local_discovery
from .errors import UserError
from .executors import make_executor
from .executors.base import DONE, Executor
from .knowledge import rules
from .model import BenchSpec, Cell, Observation, Outcome, ResolvedStack, SweepSpec, Target
from .plan import check_nodes, parse_plan
from .predict import predict
from .resolve import check_indexes, resolve_all
from .store import Store


class Progress:
    """What the pipeline reports as it goes; the CLI draws it with Rich. No-ops here."""

    def phase(self, name: str, total: int) -> None: ...

    def advance(self, name: str) -> None: ...

    def cell_done(self, cell: Cell, outcome: Outcome) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass
class RunOptions:
    wheelhouse: str | None = None
    offline: bool = False
    workdir: str | None = None  # where job directories go; default beside the database
    skip_predicted_failures: bool = False  # spend no GPU time on cells the knowledge says fail
    executor: str | None = None  # --executor: overrides the plan's, also when resuming
    bench: bool = False  # --bench: the bench rung with its defaults where the plan asks for none
    share: int | None = None  # --share N: also N processes sharing one GPU, against one alone

    def as_dict(self) -> dict:
        return asdict(self)


def with_options(spec: SweepSpec, options: RunOptions) -> SweepSpec:
    """The plan as the command line amends it: --executor, --bench, --share."""
    spec = with_executor(spec, options.executor)
    if (options.bench or options.share) and spec.bench is None:
        spec = replace(spec, bench=BenchSpec())
    if options.share:
        spec = replace(spec, bench=replace(spec.bench, share=tuple(sorted({1, options.share, *spec.bench.share}))))
    return spec


def with_executor(spec: SweepSpec, executor: str | None) -> SweepSpec:
    """The plan with another executor (--executor); its own machine's GPUs become the pool's."""
    if executor is None or executor == spec.executor:
        return spec
    from .model import EXECUTORS

    if executor not in EXECUTORS:
        raise UserError(f"unknown executor {executor!r}; this version has: {', '.join(EXECUTORS)}.")
    targets = "discover" if spec.targets == "local" and executor != "local" else spec.targets
    if executor != "slurm" and not isinstance(targets, str) and any(t.gres or t.features for t in targets):
        raise UserError(f"the plan's targets select Slurm nodes by gres or features; --executor {executor} cannot honour them.")
    check_nodes(spec.bench, executor)
    return replace(spec, executor=executor, targets=targets)


def targets_for(spec: SweepSpec) -> list[Target]:
    if spec.targets == "discover" and spec.executor != "local":
        from .executors import discover

        found = discover(spec.executor)
        if not found:
            raise UserError(f"{spec.executor} discovery found no GPU in the pool; declare [[targets]] instead.")
        return found
    if spec.targets in ("local", "discover"):
        return local_discovery.discover()
    if spec.executor != "local":
        return list(spec.targets)
    # Declared classes: on the local executor, bind each to this machine's GPUs of that class.
    local = local_discovery.gpu_classes(local_discovery.local_gpus())
    bound = []
    for declared in spec.targets:
        match = next((t for t in local if t.name == declared.name and (declared.cc in (None, t.cc))), None)
        bound.append(replace(declared, devices=match.devices if match else ()))
    return bound


def plan_stacks(spec: SweepSpec, options: RunOptions) -> list:
    """The plan's stacks, and everything about them that can be known before the first cell: a
    variant never built, an index that does not answer. Called before any store is opened."""
    offline = options.offline or spec.offline
    stacks, seen = [], set()
    for stack_spec in spec.stacks:
        for stack in space.expand(stack_spec, offline, spec.platform):
            if stack.key not in seen:
                seen.add(stack.key)
                stacks.append(stack)
    check_variants(stacks)
    check_indexes(stacks, options.wheelhouse or spec.wheelhouse, offline)
    return stacks


def start(store: Store, spec: SweepSpec, plan_text: str, plan_path: str | None, options: RunOptions,
          progress: Progress, kind: str = "sweep", stacks: list | None = None) -> int:
    """The submit side: resolve the plan's stacks (plan_stacks unless given) and store every cell. Returns the sweep id."""
    offline = options.offline or spec.offline
    wheelhouse = options.wheelhouse or spec.wheelhouse
    stacks = plan_stacks(spec, options) if stacks is None else stacks
    targets = targets_for(spec)
    progress.phase("resolve", len(stacks))
    resolved = resolve_all(stacks, spec.platform, wheelhouse, offline, on_done=lambda _r: progress.advance("resolve"))
    # What resume needs is stored with the sweep: the plan text and the effective options.
    options = replace(options, wheelhouse=wheelhouse, offline=offline)
    # One transaction: a sweep is stored whole (targets, stacks, cells, predictions) or not at all.
    return store.create_sweep(spec.name, kind, plan_text, plan_path, options.as_dict(), targets, resolved,
                              lambda r, target: predict(Cell(0, r.stack, target, r)).to_dict())


def check_variants(stacks: list) -> None:
    """A variant the knowledge says was never built for any of the plan's versions is a typo in the
    plan, not a finding: one sentence before anything is resolved or stored."""
    by_variant: dict[tuple[str, str], list] = {}
    for stack in stacks:
        by_variant.setdefault((stack.framework, stack.variant), []).append(stack)
    for (framework, variant), mine in by_variant.items():
        why = [rules.never_built(stack.framework, stack.version, stack.variant) if stack.env == "uv" else None for stack in mine]
        if all(why):
            versions = ", ".join(sorted({stack.version for stack in mine}))
            raise UserError(f"{framework} variant {variant!r} was never built for {versions}: {why[0]}; choose a variant that was built.")


def _workdir(store: Store, sweep_id: int, options: RunOptions) -> Path:
    root = Path(options.workdir).expanduser().resolve() if options.workdir else store.runs_dir
    return root / f"sweep-{sweep_id}"


def run(store: Store, sweep_id: int, progress: Progress) -> None:
    """Give every cell of the sweep without a verdict one; interrupted runs leave the rest pending.
    Cells that could not be tested (UNTESTED) are tried again, their resolution too where uv could not ask."""
    row = store.sweep(sweep_id)
    options = RunOptions(**row["options"])
    spec = with_options(parse_plan(row["plan_text"], row["plan_path"] or f"sweep {sweep_id}"), options)
    if row["status"] != "submitted":  # a scheduler still holds this sweep's jobs: collect them first
        store.retry_untested(sweep_id)
    pending = store.cells_of(sweep_id, pending_only=True)
    if resolve_again(store, sweep_id, spec, options, pending, progress):
        pending = store.cells_of(sweep_id, pending_only=True)
    progress.phase("cells", len(pending))

    def record(cell: Cell, outcome: Outcome, observation: Observation | None, observed: bool = True) -> None:
        store.record_result(cell.id, outcome, observation, observed)
        progress.cell_done(cell, outcome)
        progress.advance("cells")

    predicted = store.predictions_of(sweep_id)
    runnable = []
    for cell in pending:
        prediction = predicted.get(cell.id)
        if not cell.resolved.ok:
            record(cell, analysis.classify(cell.resolved, None), None)
        elif options.skip_predicted_failures and prediction and prediction["verdict"] == "fail":
            failing = next((r for r in prediction["reasons"] if r["verdict"] == "fail"), {"text": "", "source": ""})
            outcome = Outcome(prediction["code"], prediction["stage"], f"predicted, not run: {failing['text']}",
                              {"prediction": {"reasons": prediction["reasons"]}})
            record(cell, outcome, None, observed=False)
        else:
            runnable.append(cell)

    executor: Executor = make_executor(spec, options.wheelhouse, options.offline)
    prechecked = executor.precheck(runnable)
    jobs_cells = []
    for cell in runnable:
        if prechecked.get(cell.id):
            observation = Observation(facts={}, no_match=prechecked[cell.id])
            record(cell, analysis.classify(cell.resolved, observation), observation)
        else:
            jobs_cells.append(cell)

    workdir = _workdir(store, sweep_id, options)
    detached = executor.detached  # the scheduler runs the jobs on its own (a DAG)
    if detached and row["status"] == "submitted":
        jobs = executor.attach(jobs_cells, workdir)
    else:
        jobs = prepare_jobs(executor, jobs_cells, workdir)
        if getattr(executor, "env_root", None):  # local, Slurm: the environments this sweep uses, for `gpucompat envs`
            env_cache.record_use(executor.env_root, [(job.env_dir, job.cell.resolved) for job in jobs], sweep_id, spec.name, store.shown)
        if jobs:
            executor.submit(jobs)
    waiting = {job.id: job for job in jobs}

    def collect_finished() -> None:
        states = executor.poll()
        for job_id in [j for j in waiting if states.get(j) == DONE]:
            job = waiting.pop(job_id)
            observation = executor.collect(job)
            record(job.cell, classify_observation(job.cell.resolved, observation), observation)

    if detached:
        collect_finished()
        store.finish_sweep(sweep_id, "submitted" if waiting else "done")
        if waiting:
            progress.note(f"{len(waiting)} cells are with {executor.name}: {executor.submitted}; "
                          f"`gpucompat sweep --resume {sweep_id}` collects them once they finish")
        return
    try:
        while waiting:
            collect_finished()
            if waiting:
                time.sleep(0.05)
    except BaseException:
        executor.cancel(list(waiting.values()))
        store.finish_sweep(sweep_id, "interrupted")
        raise
    store.finish_sweep(sweep_id, "done")


def resolve_again(store: Store, sweep_id: int, spec: SweepSpec, options: RunOptions, pending: list[Cell], progress: Progress) -> bool:
    """Resolve once more the stacks whose resolution could not ask the index; False if there were none."""
    stacks = list({cell.stack.key: cell.stack for cell in pending if not cell.resolved.ok and cell.resolved.cause}.values())
    if not stacks:
        return False
    progress.phase("resolve", len(stacks))
    for resolved in resolve_all(stacks, spec.platform, options.wheelhouse, options.offline, on_done=lambda _r: progress.advance("resolve")):
        predicted = {cell.id: predict(Cell(cell.id, resolved.stack, cell.target, resolved)).to_dict()
                     for cell in pending if cell.stack.key == resolved.stack.key}
        store.update_resolution(sweep_id, resolved, predicted)
    return True


def prepare_jobs(executor: Executor, cells: list[Cell], workdir: Path) -> list:
    """The executor's job files; a directory that cannot be written is the user's to fix."""
    try:
        return executor.prepare(cells, workdir)
    except OSError as exc:
        raise UserError(f"cannot write the job files under {str(workdir)[:200]!r}: {exc.strerror or exc}; "
                        "choose another --workdir (or --out).") from None


def classify_observation(resolved: ResolvedStack, observation: Observation) -> Outcome:
    """Classification never crashes a sweep: a bug here is recorded as INTERNAL."""
    try:
        return analysis.classify(resolved, observation)
    except Exception as exc:  # noqa: BLE001
        return Outcome("INTERNAL", observation.timed_out_stage or "compute", f"gpucompat could not classify this cell: {exc!r}", {"bug": repr(exc)})


def dry_run(spec: SweepSpec, plan_text: str, options: RunOptions, out: Path, progress: Progress) -> list[Path]:
    """Everything a real run would submit, written under `out`; nothing is submitted or stored."""
    store = Store("sqlite://")  # in memory: a dry run leaves no sweep behind
    sweep_id = start(store, spec, plan_text, None, options, progress)
    executor = make_executor(spec, options.wheelhouse, options.offline)
    cells = store.cells_of(sweep_id)
    runnable = [cell for cell in cells if cell.resolved.ok]
    if not runnable:
        why = analysis.classify(cells[0].resolved, None).summary if cells else "the plan expands to no cell"
        raise UserError(f"dry run: no stack of the plan resolved, so there is nothing to submit; the first: {why}")
    prepare_jobs(executor, runnable, out.resolve())
    return sorted(p for p in out.rglob("*") if p.is_file())
