"""`[slurm] extra_sbatch`: the sbatch options a plan may add, by allowlist.

A site adds options to every job it runs (a mail address, a license, an accounting key), but an
option may also change what the probe tests: `--export=ALL,LD_PRELOAD=/tmp/x.so` changes the
environment it starts in, `--uid=0` the user it runs as, `--open-mode` its log, `--signal` when it
is stopped. So an option is written only if it is named below with why it cannot change the job's
environment, identity, output or timing; every other sbatch option is refused with its reason.

Options are read as sbatch reads them (getopt_long): `--name=value`, `--name value` and the short
forms (`-L value`, `-Lvalue`), each written back as `--name=value`. sbatch takes any unambiguous
prefix of a long option (`--mail-t` is `--mail-type`); an allowed option must be written whole, since
a prefix that names one option in one Slurm release may name another (or two) in the next.

The option names, their arguments and short forms are Slurm's own: src/common/slurm_opt.c (every
option with a set_func or set_func_sbatch) and doc/man/man1/sbatch.1, SchedMD/slurm master at
284c3b95 (26.11.0rc1).
"""

from __future__ import annotations

import re

from .errors import UserError

SLURM_RELEASE = "26.11"

# Every long option of sbatch -> whether it takes a value ("value", "optional", "none").
_NONE = ("consolidate-segments contiguous external get-user-env help hold ignore-pbs no-requeue overcommit oversubscribe "
         "parsable quiet reboot spread-job spread-segments stepmgr test-only usage use-min-nodes verbose version wait")
_OPTIONAL = "exclusive nice no-kill oom-kill-step propagate requeue resv-ports"
_VALUE = ("account acctg-freq array autocomplete batch bb bbf begin chdir cluster cluster-constraint clusters comment constraint "
          "container container-id context core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot "
          "dependency distribution error exclude export export-file extra extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node "
          "gpus-per-socket gpus-per-task gres gres-flags hint input job-name kill-on-invalid-dep licenses mail-type mail-user "
          "mcs-label mem mem-bind mem-per-cpu mem-per-gpu mem-update mincpus network nodefile nodelist nodes ntasks "
          "ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output partition prefer "
          "priority profile qos reservation resources runtime segment signal sockets-per-node switches tasks-per-node "
          "thread-spec threads-per-core time time-min tmp tres-bind tres-per-task uid wait-all-nodes wckey wrap")
SBATCH_OPTIONS = {**{n: "none" for n in _NONE.split()}, **{n: "optional" for n in _OPTIONAL.split()},
                  **{n: "value" for n in _VALUE.split()}}
SBATCH_SHORT = {
    "A": "account", "B": "extra-node-info", "C": "constraint", "D": "chdir", "F": "nodefile", "G": "gpus", "H": "hold",
    "J": "job-name", "L": "licenses", "M": "clusters", "N": "nodes", "O": "overcommit", "Q": "quiet", "S": "core-spec",
    "V": "version", "W": "wait", "a": "array", "b": "begin", "c": "cpus-per-task", "d": "dependency", "e": "error",
    "h": "help", "i": "input", "k": "no-kill", "m": "distribution", "n": "ntasks", "o": "output", "p": "partition",
    "q": "qos", "s": "oversubscribe", "t": "time", "v": "verbose", "w": "nodelist", "x": "exclude",
}

# Options gpucompat writes itself, or that the plan's own keys and targets set: an extra_sbatch line with one of
# them would override them (a --time that kills cells early, an --output that hides the log). -> what sets it.
OWN_SBATCH = {
    "--array": "gpucompat writes itself (one array per GPU class)", "--output": "gpucompat writes itself (the job's log)",
    "--error": "gpucompat writes itself (the job's log)", "--input": "gpucompat leaves unset",
    "--job-name": "gpucompat writes itself (it names the sweep)", "--wrap": "gpucompat writes itself (the array script)",
    "--parsable": "gpucompat writes itself (it reads sbatch's answer)",
    "--chdir": "gpucompat writes itself (each cell runs in its own directory)", "--test-only": "gpucompat writes itself (the precheck)",
    "--time": "gpucompat sets from [timeouts] install and cell", "--time-min": "gpucompat sets from [timeouts] install and cell",
    "--gres": "gpucompat sets from the [[targets]] gres and [bench] scale", "--constraint": "gpucompat sets from the [[targets]] features",
    "--nodes": "gpucompat sets from [bench] nodes", "--ntasks-per-node": "gpucompat sets from [bench] scale",
    # not written as such: the task count is --nodes x --ntasks-per-node (one task per GPU), which the probe's srun step uses
    "--ntasks": "gpucompat sets as [bench] nodes x scale, one task per GPU (through --nodes and --ntasks-per-node)",
    "--partition": "the plan sets with [slurm] partition", "--account": "the plan sets with [slurm] account",
    "--qos": "the plan sets with [slurm] qos", "--reservation": "the plan sets with [slurm] reservation",
    "--mem": "the plan sets with [slurm] mem", "--cpus-per-task": "the plan sets with [slurm] cpus_per_task",
}
# Options that hold the array or block the submission: gpucompat would wait on a sweep that never starts,
# or on sbatch itself (--wait returns only when the array has ended). -> what it does.
HOLDING_SBATCH = {
    "--hold": "would hold the array until someone releases it", "--begin": "would hold the array until the time it names",
    "--dependency": "would hold the array until other jobs end",
    "--wait": "would make sbatch return only when the array has ended, so gpucompat would hang on submit",
}

_PLAIN = re.compile(r"[A-Za-z0-9_.:,=/@+%\[\]-]{1,200}", re.ASCII)  # what quoting.sbatch_directive writes as it is
_MAIL_TYPE = re.compile(r"(NONE|BEGIN|END|FAIL|REQUEUE|ALL|INVALID_DEPEND|STAGE_OUT|TIME_LIMIT(_(90|80|50))?|ARRAY_TASKS)"
                        r"(,(NONE|BEGIN|END|FAIL|REQUEUE|ALL|INVALID_DEPEND|STAGE_OUT|TIME_LIMIT(_(90|80|50))?|ARRAY_TASKS))*",
                        re.ASCII | re.IGNORECASE)

# The allowlist: option -> (its value as a pattern and in words, or None where it takes none; why it is safe).
# None of these changes what the job runs, its variables (beyond Slurm's informational SLURM_* ones), the user
# it runs as, its log, or when it is stopped; each only asks for something before the job starts or says
# something about it. An option gpucompat or a plan key sets stays in OWN_SBATCH, refused.
ALLOWED_SBATCH = {
    "--mail-type": ((_MAIL_TYPE, "BEGIN, END, FAIL, ALL... separated by commas"), "only says on which events Slurm emails the user"),
    "--mail-user": ((_PLAIN, "an address"), "only says whom Slurm emails"),
    "--comment": ((_PLAIN, "a plain word (no spaces)"), "a note Slurm keeps with the job for squeue and sacct"),
    "--wckey": ((_PLAIN, "a workload key"), "an accounting key Slurm keeps with the job, for sites that bill by it (TrackWCKey)"),
    "--licenses": ((_PLAIN, "licenses such as 'scratch:1'"),
                   "asks for licenses or shared resources (a file system, a tool's seats) the job must hold to start"),
    "--resources": ((_PLAIN, "resources such as 'flat:2'"), "asks for hierarchical resources the job must hold to start, as --licenses does"),
    "--exclude": ((_PLAIN, "a node list such as 'gpu[01-03]'"), "keeps the job off named nodes (a site's known-bad ones); where it runs is unchanged"),
    "--tmp": ((re.compile(r"[0-9]{1,9}[KMGT]?", re.ASCII), "a size such as '100G'"),
              "asks for nodes with this much local temporary disk; the job sees the same file systems"),
    "--nice": ((re.compile(r"-?[0-9]{1,10}", re.ASCII), "a whole number"),
               "only moves the array down the queue (up, for an administrator); nothing changes once a cell runs"),
    "--priority": ((re.compile(r"[0-9]{1,10}|TOP", re.ASCII), "a whole number or TOP"),
                   "only sets the array's place in the queue (administrators only); nothing changes once a cell runs"),
    # Without =user/mcs/topo Slurm also gives the job every CPU and GPU of its nodes, so CUDA_VISIBLE_DEVICES lists all
    # of them; the probe records what it sees and tests the first, and a bench runs alone, which is why sites ask for it.
    "--exclusive": ((re.compile(r"user|mcs|topo", re.ASCII), "user, mcs or topo"), "keeps other jobs off the job's nodes, so a bench runs alone"),
    "--no-requeue": (None, "only forbids Slurm to start a cell again after a node failure or a preemption; the cell ends as Slurm left it"),
    "--wait-all-nodes": ((re.compile(r"[01]", re.ASCII), "0 or 1"),
                         "only holds the script until all the job's nodes have booted (sites that power nodes down)"),
}

_ENVIRONMENT = "sets the variables the job starts with (an LD_PRELOAD or a PATH changes what the probe tests)"
_CLUSTER = "submits the array to another cluster, where gpucompat's squeue, sacct and scontrol do not look"
_SAMPLING = "samples the job while it runs, at a cost the bench would measure"
_EXITS = "makes sbatch print something and exit without submitting the array"
_NODES = "asks every cell for the same named nodes, not any node of its GPU class"
_GPUS = "asks for GPUs beside the --gres gpucompat writes from the [[targets]] gres and [bench] scale"
_PER_TASK = f"{_GPUS}, and binds each task to its own GPUs (CUDA_VISIBLE_DEVICES)"
_BINDING = "changes which GPUs each task sees (CUDA_VISIBLE_DEVICES), the environment the probe and its srun workers run in"
_LAYOUT = "changes how the job's nodes, CPUs or tasks are chosen, laid out or bound, which [slurm] cpus_per_task and [bench] scale and nodes decide"
# Every other sbatch option -> why it is refused (it changes the job's environment, identity, output or timing,
# or something gpucompat or the plan sets).
REFUSED_SBATCH = {
    "--export": _ENVIRONMENT, "--export-file": _ENVIRONMENT,
    "--get-user-env": "loads a login shell's environment into the job, which changes the variables the probe starts with",
    "--propagate": "carries the submitting shell's resource limits into the job, which the probe's CUDA start check judges",
    "--container": "runs the job inside an OCI container, not in the environment under test",
    "--container-id": "runs the job inside an OCI container, not in the environment under test",
    "--runtime": "runs the job through another runtime plugin, not as gpucompat's script says",
    "--bb": "stages a burst buffer, which sets paths and variables inside the job",
    "--bbf": "stages a burst buffer, which sets paths and variables inside the job",
    "--network": "changes the network resources and variables the job's steps get, which the multi-node bench uses",
    "--uid": "submits the job as another user", "--gid": "submits the job as another group",
    "--context": "runs the job in another SELinux context",
    "--mcs-label": "labels the job with another group (MCS), which decides who shares its nodes and sees it",
    "--open-mode": "changes how the job's log is opened (appended to or truncated), which gpucompat reads as each cell's own",
    "--quiet": "stops sbatch printing the job ID, which gpucompat reads",
    "--verbose": "adds sbatch's own messages to what gpucompat reads from it",
    "--help": _EXITS, "--usage": _EXITS, "--version": _EXITS, "--autocomplete": _EXITS,
    "--deadline": "has Slurm remove cells it cannot finish by a date, so they end untested",
    "--signal": "signals the job before its time limit, which the probe takes for being stopped",
    "--requeue": "lets Slurm start a cell again from the beginning, over its own log and result",
    "--no-kill": "keeps a job on its remaining nodes after one fails, so a multi-node bench would run on fewer nodes than it says",
    "--oom-kill-step": "changes whether running out of memory ends the whole step, which decides how a cell fails",
    "--reboot": "reboots the nodes before the job, which delays it",
    "--delay-boot": "changes how long the job waits before nodes are rebooted into other features",
    "--switches": "keeps the array pending for a switch layout, up to a wait of its own",
    "--cpu-freq": "sets the CPUs' clock, which the bench measures", "--gpu-freq": "sets the GPUs' clocks, which the bench measures",
    "--acctg-freq": _SAMPLING, "--profile": _SAMPLING,
    "--kill-on-invalid-dep": "only acts on a --dependency, which gpucompat refuses",
    "--ignore-pbs": "only acts on #PBS lines, which gpucompat's scripts do not have",
    "--external": "makes the array an external job, which Slurm never starts",
    "--clusters": _CLUSTER, "--cluster": _CLUSTER, "--cluster-constraint": _CLUSTER,
    "--prefer": "chooses nodes by other features than the [[targets]] features gpucompat writes as --constraint",
    "--extra": "can filter nodes as --constraint does, which gpucompat writes from the [[targets]] features",
    "--batch": "chooses by features which node runs the script, which the [[targets]] features decide",
    "--nodelist": _NODES, "--nodefile": _NODES,
    "--gpus": _GPUS, "--gpus-per-node": _GPUS, "--gpus-per-socket": _GPUS, "--gpus-per-task": _PER_TASK, "--tres-per-task": _PER_TASK,
    "--gpu-bind": _BINDING, "--tres-bind": _BINDING,
    "--ntasks-per-gpu": "sets the tasks per GPU, which gpucompat sets as one task per GPU from [bench] scale",
    "--ntasks-per-tres": "sets the tasks per GPU, which gpucompat sets as one task per GPU from [bench] scale",
    "--tasks-per-node": "is --ntasks-per-node's old name, which gpucompat sets from [bench] scale",
    "--mem-per-cpu": "sets the job's memory, which [slurm] mem sets (as --mem)",
    "--mem-per-gpu": "sets the job's memory, which [slurm] mem sets (as --mem)",
    "--mem-update": "changes the job's memory limit while it runs",
    "--cpus-per-gpu": "sets the job's CPUs, which [slurm] cpus_per_task sets", "--mincpus": "sets the job's CPUs, which [slurm] cpus_per_task sets",
    "--oversubscribe": "lets other jobs share the job's CPUs and GPUs, which a bench would measure",
    "--stepmgr": "changes how the job's steps (the multi-node bench's srun) are managed",
    "--resv-ports": "changes how the job's steps (the multi-node bench's srun) are managed",
    **{f"--{name}": _LAYOUT for name in ("core-spec thread-spec cores-per-socket sockets-per-node threads-per-core extra-node-info hint "
                                          "ntasks-per-core ntasks-per-socket distribution mem-bind overcommit gres-flags spread-job "
                                          "use-min-nodes contiguous segment consolidate-segments spread-segments").split()},
}

# one list item: a long option (with =value or a space and the value) or a short one (the value after it, or a space)
_ITEM = re.compile(r"(?:(?P<long>--[a-z][a-z0-9-]{0,40})(?:(?:=| +)(?P<lvalue>[!#-&(-~]{1,200}))?"  # printable ASCII but quotes
                   r"|(?P<short>-[A-Za-z]) *(?P<svalue>[!#-&(-~]{1,200})?)", re.ASCII)
_ALL = "extra_sbatch takes only options that leave the job's environment, identity, output and timing as gpucompat writes them"


def _resolve(given: str) -> tuple[str | None, list[str]]:
    """The long option sbatch reads `given` as (None if it cannot tell) and the options it may be."""
    if given.startswith("--"):
        name = given[2:]
        if name in SBATCH_OPTIONS:  # an exact name wins over the longer options it begins
            return f"--{name}", [f"--{name}"]
        candidates = [f"--{n}" for n in sorted(SBATCH_OPTIONS) if n.startswith(name)]
    else:
        candidates = [f"--{SBATCH_SHORT[given[1]]}"] if given[1] in SBATCH_SHORT else []
    return (candidates[0] if len(candidates) == 1 else None), candidates


def check_option(item: object, where: str) -> str:
    """One extra_sbatch item -> the option as it is written (`--name` or `--name=value`), or one sentence why not."""
    found = _ITEM.fullmatch(item) if isinstance(item, str) else None
    if not found:
        raise UserError(f"{where} must be a list of sbatch options, one string each like \"--mail-type=END\", "
                        "\"--mail-user me@example.org\" or \"-L scratch\" (no quotes, control characters or spaces inside a value).")
    given, value = (found["long"], found["lvalue"]) if found["long"] else (found["short"], found["svalue"])
    option, candidates = _resolve(given)
    shown = f"{where} {item[:80]!r}"
    if not candidates:
        raise UserError(f"{shown}: sbatch has no option {given} (as of Slurm {SLURM_RELEASE}); remove it.")
    if option is None:
        raise UserError(f"{shown}: sbatch cannot tell which option {given} abbreviates ({' or '.join(candidates)}); "
                        "write the whole name of the one you mean.")
    read_as = "" if option == given else f" (sbatch reads it as {option})"
    if option in HOLDING_SBATCH:
        raise UserError(f"{shown}{read_as} {HOLDING_SBATCH[option]}; remove it: gpucompat submits the array and waits for it itself.")
    if option in OWN_SBATCH:
        raise UserError(f"{shown}{read_as} would override {option}, which {OWN_SBATCH[option]}; remove it.")
    if option not in ALLOWED_SBATCH:
        why = REFUSED_SBATCH.get(option, "is not one gpucompat knows to leave the job as it writes it")
        raise UserError(f"{shown}{read_as}: {option} {why}; remove it: {_ALL}.")
    if given.startswith("--") and option != given:  # a short form is one fixed letter, never a prefix
        raise UserError(f"{shown}: write {option} whole; an abbreviation may name another option in another Slurm release.")
    return _with_value(option, value, shown)


def _with_value(option: str, value: str | None, shown: str) -> str:
    pattern = ALLOWED_SBATCH[option][0]
    takes = SBATCH_OPTIONS[option[2:]]
    if value is None:
        if takes == "value":
            raise UserError(f"{shown}: {option} needs a value ({pattern[1]}), e.g. \"{option}=...\".")
        return option
    if pattern is None or takes == "none":
        raise UserError(f"{shown}: {option} takes no value; write \"{option}\".")
    if not pattern[0].fullmatch(value):
        raise UserError(f"{shown}: {value[:60]!r} is not a value of {option}, which takes {pattern[1]}.")
    return f"{option}={value}"


def check_extra_sbatch(value: object, where: str) -> list[str]:
    """`[slurm] extra_sbatch`: a list of options, each checked (check_option) and written as `--name=value`."""
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list of sbatch options, like [\"--mail-type=END\", \"--mail-user=me@example.org\"].")
    return [check_option(item, where) for item in value]
