"""The pipeline, end to end: plan -> targets, stacks -> resolve -> cells -> executor -> verdicts.

`start` does the submit side (no GPU needed) and stores every cell before any job
runs; `run` executes whatever cells of a sweep have no verdict yet, so resuming an
interrupted sweep is the same call.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from . import analysis, env_cache, space
from .discover import local as local_discovery
from .errors import UserError
from .executors import make_executor
from .executors.base import DONE, Executor
from .probe_build import probe_pyz
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
    check_size(spec, stacks, targets, progress, say=kind == "sweep")
    progress.phase("resolve", len(stacks))
    resolved = resolve_all(stacks, spec.platform, wheelhouse, offline, on_done=lambda _r: progress.advance("resolve"))
    # What resume needs is stored with the sweep: the plan text and the effective options.
    options = replace(options, wheelhouse=wheelhouse, offline=offline)
    # One transaction: a sweep is stored whole (targets, stacks, cells, predictions) or not at all.
    return store.create_sweep(spec.name, kind, plan_text, plan_path, options.as_dict(), targets, resolved,
                              lambda r, target: predict(Cell(0, r.stack, target, r)).to_dict())


# What one cell leaves in its directory, on disk: job.json, run.sh, the install files, result.json and the logs
# (a result is 7-12 KB, recorded on an H100; each small file takes a 4 KiB block). The bench's telemetry adds to it.
CELL_DISK_BYTES = 48 * 1024


def check_size(spec: SweepSpec, stacks: list, targets: list[Target], progress: Progress, say: bool = True) -> None:
    """How big the sweep is, said before anything is resolved or written, and refused past the plan's max_cells:
    a plan of 165,000 cells would flood the scheduler and fill the disk before anyone saw a verdict."""
    count = len(stacks) * len(targets)
    shape = f"{_many(len(stacks), 'stack')} × {_many(len(targets), 'GPU class', 'GPU classes')}"
    if count > spec.max_cells:
        raise UserError(f"the plan expands to {_many(count, 'cell')} ({shape}), more than its max_cells of {spec.max_cells:,}; "
                        "make the plan smaller, or raise max_cells in the plan if the site can take that many jobs.")
    if say:
        environments = len({stack.key for stack in stacks if stack.env != "current"})
        disk = (count * CELL_DISK_BYTES + probe_pyz().stat().st_size) / 1e6
        built = f", and up to {environments:,} environments to build (each once, reused by later sweeps)" if environments else ""
        progress.note(f"{_many(count, 'cell')} ({shape}): about {disk:,.1f} MB of job files with one probe.pyz for the sweep{built}")


def _many(count: int, one: str, more: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else more or one + 's'}"


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


def check_directory(path: Path, what: str) -> Path:
    """--workdir or --out: a directory, or a path where one can be made (checked before anything is stored)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {str(path)[:200]!r} must be a directory, and it is a file; choose a directory.")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is not None and not path.exists() and not parent.is_dir():
        raise UserError(f"{what} {str(path)[:200]!r} cannot be made: {str(parent)[:200]!r} is a file, not a directory; choose another.")
    return path


def check_empty_out(out: Path, force: bool) -> None:
    """A dry run writes into an empty or new directory; one holding files is only written over with --force."""
    check_directory(out, "--out")
    if out.is_dir() and not force:
        found = sum(1 for _ in zip(range(1000), out.iterdir()))
        if found:
            entries = "1 entry" if found == 1 else f"{found if found < 1000 else 'over 1,000'} entries"
            raise UserError(f"--out {str(out)[:200]!r} is not empty ({entries}); "
                            "choose a new or empty directory, or add --force to write over it.")


class SweepLock:
    """One gpucompat at a time runs (or resumes) a sweep: an exclusive flock on sweep-ID.lock beside the store's job
    directories, holding the owner's pid. Taken before anything else, released when the process ends, however."""

    def __init__(self, store: Store, sweep_id: int):
        self.handle = None
        path = store.runs_dir / f"sweep-{sweep_id}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a+")
        except OSError:  # nowhere to keep a lock (a read-only data directory): the sweep runs unguarded
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip()[:20] or "unknown"
            handle.close()
            raise UserError(f"sweep {sweep_id} is being run or resumed by another gpucompat (pid {owner}); "
                            f"wait for it to end, or stop it, before `gpucompat sweep --resume {sweep_id}`.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()  # closing the file releases the flock
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def resume_in(store: Store, sweep_id: int, workdir: Path) -> None:
    """--resume ID --workdir DIR: the sweep's job directories go under DIR from now on (this run and the next)."""
    row = store.sweep(sweep_id)
    if row["status"] == "submitted":
        raise UserError(f"sweep {sweep_id} has jobs with the scheduler, which write into its first work directory; "
                        f"resume it without --workdir.")
    check_directory(workdir, "--workdir")
    store.set_options(sweep_id, {**row["options"], "workdir": str(workdir.resolve())})


def run(store: Store, sweep_id: int, progress: Progress) -> None:
    """Give every cell of the sweep without a verdict one; interrupted runs leave the rest pending.
    Cells that could not be tested (UNTESTED) are tried again, their resolution too where uv could not ask.
    A sweep whose jobs cannot be set up (a work directory that cannot be written, a scheduler that does not
    answer) is marked failed, never left running, and the sentence says how to resume it."""
    status = store.sweep(sweep_id)["status"]
    try:
        _run(store, sweep_id, progress)
    except UserError as exc:
        if status != "submitted":  # a sweep whose jobs a scheduler holds stays "submitted", for --resume to collect
            store.finish_sweep(sweep_id, "failed")
        raise UserError(f"{str(exc).rstrip('.')}; sweep {sweep_id} is kept, and `gpucompat sweep --resume {sweep_id}` "
                        "(with --workdir DIR to write its jobs elsewhere) goes on once that is fixed.") from None
    except BaseException:
        if status != "submitted":
            store.finish_sweep(sweep_id, "interrupted")
        raise


def _run(store: Store, sweep_id: int, progress: Progress) -> None:
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

    decided = decided_before_jobs(pending, store.predictions_of(sweep_id), options.skip_predicted_failures)
    for cell, outcome, observed in decided.outcomes:
        record(cell, outcome, None, observed)
    runnable = decided.runnable

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


@dataclass
class BeforeJobs:
    """A sweep's pending cells split as a run splits them before any job: decided at resolve (the stack did not resolve),
    predicted to fail and skipped (--skip-predicted-failures), and the cells that go to the executor."""

    outcomes: list[tuple[Cell, Outcome, bool]]  # (cell, its verdict, observed: False for a predicted failure not run)
    runnable: list[Cell]


def decided_before_jobs(cells: list[Cell], predicted: dict, skip_predicted_failures: bool) -> BeforeJobs:
    """The one split the real run and the dry run both make, so a dry run previews exactly what the run would submit."""
    outcomes, runnable = [], []
    for cell in cells:
        prediction = predicted.get(cell.id)
        if not cell.resolved.ok:
            outcomes.append((cell, analysis.classify(cell.resolved, None), True))
        elif skip_predicted_failures and prediction and prediction["verdict"] == "fail":
            failing = next((r for r in prediction["reasons"] if r["verdict"] == "fail"), {"text": "", "source": ""})
            outcome = Outcome(prediction["code"], prediction["stage"], f"predicted, not run: {failing['text']}",
                              {"prediction": {"reasons": prediction["reasons"]}})
            outcomes.append((cell, outcome, False))
        else:
            runnable.append(cell)
    return BeforeJobs(outcomes, runnable)


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
        # a file where a directory goes: said as it is, not as mkdir's "File exists"
        why = "a file stands where a directory goes" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror or exc
        raise UserError(f"cannot write the job files under {str(workdir)[:200]!r}: {why}; "
                        "choose another --workdir (or --out).") from None


def classify_observation(resolved: ResolvedStack, observation: Observation) -> Outcome:
    """Classification never crashes a sweep: a bug here is recorded as INTERNAL."""
    try:
        return analysis.classify(resolved, observation)
    except Exception as exc:  # noqa: BLE001
        return Outcome("INTERNAL", observation.timed_out_stage or "compute", f"gpucompat could not classify this cell: {exc!r}", {"bug": repr(exc)})


@dataclass
class DryRun:
    """What a dry run found and wrote, said in a few lines (and as JSON): the cells of the plan, those decided before
    any job (at resolve; with --skip-predicted-failures the predicted failures skipped), and what the real run would
    submit. Counts are by verdict code, with the first cell's reason as the example."""

    out: str
    executor: str
    cells: int
    shape: str  # "13 stacks × 10 GPU classes"
    decided_at_resolve: dict[str, int]  # code (and cause) -> cells whose stack did not resolve: no job
    resolve_examples: dict[str, str]
    skip_predicted_failures: bool
    skipped: dict[str, int]  # code -> cells predicted to fail and skipped (only with --skip-predicted-failures)
    predicted_to_fail: int  # without the option: runnable cells the knowledge predicts to fail (the option would skip them)
    gpu_jobs: int  # cells the real run hands to the scheduler, one GPU job (array task, DAG node, Job, probe) each
    submissions: str  # how they are submitted, in words
    files: list[str]

    def lines(self) -> list[str]:
        said = [f"dry run ({self.executor}): {_many(self.cells, 'cell')} ({self.shape})"]
        if self.decided_at_resolve:
            said.append(f"  {sum(self.decided_at_resolve.values()):,} decided at resolve, no job: " + "; ".join(
                f"{key} {count:,} (e.g. {self.resolve_examples[key]})" for key, count in self.decided_at_resolve.items()))
        if self.skipped:
            said.append(f"  {sum(self.skipped.values()):,} predicted to fail, skipped (--skip-predicted-failures): "
                        + ", ".join(f"{key} {count:,}" for key, count in self.skipped.items()))
        said.append(f"  {_many(self.gpu_jobs, 'GPU job')} the real run would submit" + (f": {self.submissions}" if self.submissions else "")
                    + ("; a class no node has is found by the real run's sbatch --test-only first, which a dry run does not ask"
                       if self.executor == "slurm" and self.gpu_jobs else ""))
        if self.predicted_to_fail:
            said.append(f"  {self.predicted_to_fail:,} of them predicted to fail: --skip-predicted-failures would run no job for "
                        + ("it" if self.predicted_to_fail == 1 else "them"))
        said.append(f"  {_many(len(self.files), 'file')} written under {self.out} (--list-files lists them); nothing was submitted or stored")
        return said

    def as_dict(self) -> dict:
        return asdict(self)


def dry_run(spec: SweepSpec, plan_text: str, options: RunOptions, out: Path, progress: Progress, force: bool = False) -> DryRun:
    """Everything a real run would submit, written under `out` (new or empty, unless `force`); nothing is submitted
    or stored. The cells a real run decides before any job (decided_before_jobs) get no files here either. The
    summary's files are those this run wrote, never others that were there."""
    check_empty_out(out, force)
    if force:
        unlink_links(out)
    before = _stamps(out)
    store = Store("sqlite://")  # in memory: a dry run leaves no sweep behind
    sweep_id = start(store, spec, plan_text, None, options, progress)
    executor = make_executor(spec, options.wheelhouse, options.offline)
    cells = store.cells_of(sweep_id)
    predicted = store.predictions_of(sweep_id)
    decided = decided_before_jobs(cells, predicted, options.skip_predicted_failures)
    if not any(cell.resolved.ok for cell in cells):
        why = analysis.classify(cells[0].resolved, None).summary if cells else "the plan expands to no cell"
        raise UserError(f"dry run: no stack of the plan resolved, so there is nothing to submit; the first: {why}")
    jobs = prepare_jobs(executor, decided.runnable, out.resolve()) if decided.runnable else []
    at_resolve: dict[str, int] = {}
    examples: dict[str, str] = {}
    skipped: dict[str, int] = {}
    for cell, outcome, observed in decided.outcomes:
        key = f"{outcome.code} ({outcome.cause})" if outcome.cause else outcome.code
        if observed:
            at_resolve[key] = at_resolve.get(key, 0) + 1
            examples.setdefault(key, f"{cell.stack.key}: {outcome.summary}"[:160])
        else:
            skipped[key] = skipped.get(key, 0) + 1
    failing = sum(1 for cell in decided.runnable if (predicted.get(cell.id) or {}).get("verdict") == "fail")
    stacks = {cell.stack.key for cell in cells}
    targets = {cell.target.key for cell in cells}
    return DryRun(
        out=str(out), executor=executor.name, cells=len(cells),
        shape=f"{_many(len(stacks), 'stack')} × {_many(len(targets), 'GPU class', 'GPU classes')}",
        decided_at_resolve=at_resolve, resolve_examples=examples, skip_predicted_failures=options.skip_predicted_failures,
        skipped=skipped, predicted_to_fail=0 if options.skip_predicted_failures else failing, gpu_jobs=len(jobs),
        submissions=submissions(executor, len(jobs)) if jobs else "",
        files=[str(path) for path in sorted(path for path, stamp in _stamps(out).items() if before.get(path) != stamp)])


def submissions(executor: Executor, jobs: int) -> str:
    """How the real run would hand its `jobs` GPU jobs to the scheduler, with the plan's cap on how many run at once."""
    cap = getattr(executor, "max_running", None)
    if executor.name == "slurm":
        commands = executor.submit_commands()
        arrays = sum(1 for command in commands if not command[-1] == "build.sh")
        said = f"{_many(arrays, 'job array', 'job arrays')} (one per GPU class and request)"
        said += f", at most {cap:,} tasks of each running at once ([slurm] max_running)" if cap else ""
        if any(command[-1] == "build.sh" for command in commands):
            builds = executor.environments_to_build()
            said += (f"; first a CPU array building {_many(builds, 'environment')}, the GPU arrays after it "
                     "(--dependency=afterok, [slurm] build_first)")
        return said
    if executor.name == "htcondor":
        return f"one DAG of {_many(jobs, 'node')}" + (f", DAGMan submitting at most {cap:,} at once ([htcondor] max_running)" if cap else "")
    if executor.name == "kubernetes":
        return f"{_many(jobs, 'Job')}" + (f", at most {cap:,} unfinished at once ([kubernetes] max_running)" if cap else "")
    return "probes on this machine's GPUs"


def unlink_links(folder: Path) -> None:
    """Before a --force dry run writes into `folder`: nothing it writes may land outside it. A symbolic link under it
    (to a file or a folder) is removed, never written through; a file with another name elsewhere (a hard link) is
    replaced by a copy of itself, so writing over it changes only the copy."""
    import shutil

    for root, dirs, names in os.walk(folder):  # os.walk does not enter linked folders; they are listed in dirs
        for name in dirs + names:
            path = os.path.join(root, name)
            try:
                info = os.stat(path, follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    os.unlink(path)
                elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    copy = os.path.join(root, f".{name}.{os.getpid()}.copy")
                    shutil.copy2(path, copy, follow_symlinks=False)
                    os.replace(copy, path)
            except OSError as exc:
                raise UserError(f"--out {str(folder)[:200]!r}: cannot replace the link {path[:200]!r} before writing over it "
                                f"({exc.strerror or exc.__class__.__name__}); remove it, or choose a new directory.") from None
        dirs[:] = [d for d in dirs if os.path.isdir(os.path.join(root, d))]  # the links among them are gone


def _stamps(folder: Path) -> dict[Path, tuple[int, int]]:
    """Each file under `folder` with its inode and modification time, to tell the files a run wrote."""
    found = {}
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                info = os.stat(os.path.join(root, name), follow_symlinks=False)
            except OSError:
                continue
            found[Path(root) / name] = (info.st_ino, info.st_mtime_ns)
    return found
