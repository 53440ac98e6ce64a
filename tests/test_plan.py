import pytest

from gpucompat.errors import UserError
from gpucompat.model import Target
from gpucompat.plan import check_plan_text, load_plan, parse_duration, parse_plan, parse_spec

GOOD = """
name = "t"
python = ["3.11"]
[timeouts]
install = "10m"
import = 90
compute = "1.5h"
[[stacks]]
framework = "torch"
versions = ["2.4.1", "2.5.1"]
variants = ["default", "cu121"]
[[stacks]]
framework = "jax"
versions = "latest:2"
[[stacks]]
framework = "cuda-runtime"
versions = ">=12.0,<13"
python = ["3.10", "3.12"]
[[stacks]]
framework = "cupy"
env = "current"
[[targets]]
name = "NVIDIA A100-SXM4-40GB"
cc = "8.0"
driver = "535.104.05"
"""


def test_good_plan_is_parsed_with_every_value():
    spec = parse_plan(GOOD)
    assert spec.name == "t"
    torch, jax, cuda, cupy = spec.stacks
    assert torch.versions == ("2.4.1", "2.5.1") and torch.variants == ("default", "cu121") and torch.pythons == ("3.11",)
    assert jax.versions == "latest:2" and jax.variants == ("cuda12",)
    assert cuda.versions == ">=12.0,<13" and cuda.pythons == ("3.10", "3.12")
    assert cupy.env == "current" and cupy.versions == "installed"
    assert spec.targets == (Target(name="NVIDIA A100-SXM4-40GB", cc="8.0", driver="535.104.05", count=1, declared=True),)
    assert spec.timeouts.install == 600 and spec.timeouts.import_ == 90 and spec.timeouts.compute == 5400
    assert spec.timeouts.for_stage("import") == 90


@pytest.mark.parametrize("text, expected", [
    ('nmae = "x"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "unknown key 'nmae'"),
    ('[[stacks]]\nframework="torch"\nverions=["2.4.1"]', "[[stacks]] #1: unknown key 'verions'"),
    ('[[stacks]]\nframework="pytorch"\nversions=["2.4.1"]', "unknown framework 'pytorch'"),
    ('[[stacks]]\nframework="torch"\nversions=">=2.4,,<"', "is not a PEP 440 version range"),
    ('[[stacks]]\nframework="torch"\nversions=["two"]', "'two' is not a version"),
    ('[[stacks]]\nframework="torch"\nversions="latest:0"', "'latest:N' with N a whole number from 1 to 100"),
    ('[[stacks]]\nframework="torch"\nversions="latest:x"', "malformed"),
    ('[[stacks]]\nframework="torch"\nversions=[]', "empty"),
    ('[[stacks]]\nframework="torch"', "'versions' is missing"),
    ('[[stacks]]\nframework="torch"\nversions=["2.4.1"]\nvariants=["cu12.1"]', "not a variant of torch"),
    ('[[stacks]]\nframework="torch"\nversions=["2.4.1"]\npython=[3.11]', "not a Python version"),
    ('[[stacks]]\nframework="torch"\nversions=["2.4.1"]\nenv="pixi"', "unknown env 'pixi'"),
    ('[[stacks]]\nframework="torch"\nenv="current"\nversions=["2.4.1"]', "drop 'versions'"),
    ('[timeouts]\ninstall="10 minutes"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "'10 minutes' is not a duration"),
    ('[timeouts]\ncompute=-5\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "greater than zero"),
    ('[timeouts]\nslow="5m"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "[timeouts]: unknown key 'slow'"),
    ('name = "x"', "has no [[stacks]]"),
    ('targets = "cluster"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "'targets' must be"),
    ('[[targets]]\nname="A100"\ncc="eight"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a compute capability"),
    ('executor = "pbs"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "unknown executor 'pbs'"),
    ('[[targets]]\nname="A100"\ncuda_driver="twelve"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a CUDA version"),
    ('executor = "slurm"\n[slurm]\nqueue="x"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "[slurm]: unknown key 'queue'"),
    ('executor = "slurm"\ntargets = "local"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "write targets = \"discover\""),
    ('[kubernetes]\nimage="x"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "the executor is 'local'"),
    ('[[stacks]\nframework="torch"', "is not valid TOML"),
])
def test_each_mistake_gets_one_clear_sentence(text, expected):
    with pytest.raises(UserError) as raised:
        parse_plan(text, "plan.toml")
    message = str(raised.value)
    assert expected in message
    assert message.startswith("plan.toml")
    assert "\n" not in message.strip() or "TOML" in message


def test_missing_and_unreadable_plan_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_plan(tmp_path / "nope.toml")
    with pytest.raises(UserError, match="is a directory, not a regular file"):
        load_plan(tmp_path)
    with pytest.raises(UserError, match="is a device, not a regular file"):
        load_plan("/dev/zero")  # read until memory ran out before


@pytest.mark.parametrize("value, seconds", [(90, 90), ("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400),
                                            (1.5, 2), (0.2, 1), ("0.5s", 1)])  # whole seconds, rounded up, never 0
def test_durations(value, seconds):
    assert parse_duration(value, "x") == seconds


def test_check_specs_become_a_plan():
    spec = parse_plan(check_plan_text(["torch==2.7.0+cu128", "jax[cuda12]==0.4.30", "cupy-cuda12x==13.3.0", "cuda-runtime==12.4", "tensorflow==2.15.0"], "3.11", "uv"))
    torch, jax, cupy, cuda, tf = spec.stacks
    assert (torch.versions, torch.variants) == (("2.7.0",), ("cu128",))
    assert (jax.versions, jax.variants) == (("0.4.30",), ("cuda12",))
    assert (cupy.framework, cupy.variants) == ("cupy", ("cuda12x",))
    assert cuda.versions == ("12.4",) and tf.variants == ("and-cuda",)
    assert all(s.pythons == ("3.11",) for s in spec.stacks)
    assert parse_plan(check_plan_text(["torch"], None, "current")).stacks[0].env == "current"


@pytest.mark.parametrize("specs, env, expected", [
    (["torch=2.4.1"], "uv", "is not a stack spec"),
    (["tensorflw==2.15"], "uv", "unknown framework 'tensorflw'"),
    (["torch==2.4.1"], "current", "installed version is tested"),
    (["torch==2.4.1"], "pip", "unknown env 'pip'"),
])
def test_check_spec_errors(specs, env, expected):
    with pytest.raises(UserError, match=expected):
        check_plan_text(specs, None, env)


def test_a_relative_wheelhouse_is_relative_to_the_plan(tmp_path):
    plan = tmp_path / "plans" / "p.toml"
    plan.parent.mkdir()
    plan.write_text('wheelhouse = "../wheels"\n[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    with pytest.raises(UserError, match="the plan's wheelhouse .* is not a directory"):
        load_plan(plan)  # known before anything is stored
    (tmp_path / "wheels").mkdir()
    spec, text = load_plan(plan)
    assert spec.wheelhouse == str(tmp_path / "wheels") and "wheelhouse" in text


@pytest.mark.parametrize("text, expected", [
    # a newline in any value that reaches a script is refused, however it is spelled
    ('[[targets]]\nname = "A100\\ntouch /tmp/x"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "contains a control character"),
    ('name = "sweep\\u2028x"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "contains a control character"),
    ('executor="slurm"\n[[targets]]\nname="A100"\ngres = "a100\\n"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Slurm GRES type"),
    ('executor="slurm"\n[[targets]]\nname="A100"\nfeatures = ["hbm\\n"]\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "features must be"),
    ('executor="slurm"\n[slurm]\npartition = "gpu\\n"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "is not a plain name"),
    ('executor="slurm"\n[slurm]\naccount = "a;b"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "is not a plain name"),
    # ASCII digits only: other scripts' digits match \d
    ('[[targets]]\nname="A100"\ncc="\u0668.\u0660"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a compute capability"),
    ('python = ["3.\u0661\u0661"]\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Python version"),
    ('python = ["3.99"]\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Python version from 3.8 to 3.15"),
    ('python = ["3.7"]\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Python version from 3.8 to 3.15"),
    # durations: finite, from 1 s to 30 days
    ('[timeouts]\ncell = inf\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "is not a duration"),
    ('[timeouts]\ncell = nan\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "is not a duration"),
    ('[timeouts]\ncell = 1e308\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "longer than 30 days"),
    (f'[timeouts]\ncell = {10**18}\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "longer than 30 days"),
    (f'[timeouts]\ncell = "{"9" * 400}"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "is not a duration"),
    ('[timeouts]\ncell = "31d"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "longer than 30 days"),
    # versions and values that were silently accepted
    (f'[[stacks]]\nframework="torch"\nversions=["{"1" * 5000}"]', "is not a version"),
    ('[[stacks]]\nframework="torch"\nversions=">=2.x"', "is not a PEP 440 version range"),
    ('[[stacks]]\nframework="torch"\nversions="latest:100000"', "from 1 to 100"),
    ('platform = "windows-nt-gpu"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Linux platform uv knows"),
    ('max_parallel_installs = 100000\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "from 1 to 64"),
    ('[[targets]]\nname="A100"\ngres="a100"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "select Slurm nodes"),
    ('[[targets]]\nname="A100"\ncount=10000000\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "from 1 to 4096"),
    (f'[[targets]]\nname="{"A" * 300}"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "at most 200"),
    ('executor="kubernetes"\n[kubernetes]\nimage="x"\nnamespace="a/b"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Kubernetes namespace"),
    (f'executor="kubernetes"\n[kubernetes]\nimage="x"\nnamespace="{"a" * 64}"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a Kubernetes namespace"),
    ('executor="kubernetes"\n[kubernetes]\nimage="x; rm -rf /"\n[[stacks]]\nframework="torch"\nversions=["2.4.1"]', "not a container image"),
    ("a = " + "[" * 1000 + "]" * 1000, "nests tables or arrays too deeply"),
], ids=lambda value: value[:50] if isinstance(value, str) else None)
def test_hardened_values_get_one_sentence(text, expected):
    with pytest.raises(UserError) as raised:
        parse_plan(text, "plan.toml")
    assert expected in str(raised.value)


def test_executor_options_follow_their_executor():
    from gpucompat.executors import make_executor
    from gpucompat.sweep import with_executor

    spec = parse_plan('executor="kubernetes"\n[kubernetes]\nimage="nvcr.io/nvidia/pytorch:24.08-py3"\n'
                      '[[stacks]]\nframework="cuda-runtime"\nversions=["12.4"]')
    assert make_executor(spec, None, False).image == "nvcr.io/nvidia/pytorch:24.08-py3"
    # the Kubernetes image was handed to SlurmExecutor before: exit 3
    assert make_executor(with_executor(spec, "slurm"), None, False).name == "slurm"


@pytest.mark.parametrize("spec", ["torch==" + "1" * 5000, "torch==2.4.\u0661", "torch==2.4.1\n", "x" * 300],
                         ids=["5000-digits", "arabic-digit", "trailing-newline", "300-chars"])
def test_stack_specs_with_absurd_versions_are_one_sentence(spec):
    with pytest.raises(UserError, match="is not a stack spec"):
        parse_spec(spec)


STACK = '[[stacks]]\nframework="cuda-runtime"\nversions=["12.4"]\n'


def test_site_resource_options_are_parsed_per_executor():
    from gpucompat.executors import make_executor

    slurm = parse_plan('executor="slurm"\n[slurm]\npartition="gpu"\nqos="short"\nreservation="maint_1"\nmem="16G"\n'
                       'cpus_per_task=4\nextra_sbatch=["--exclusive", "--mail-user me@example.org"]\n' + STACK)
    assert slurm.executor_options["slurm"]["mem"] == 16384
    assert make_executor(slurm, None, False).site_args == [
        "--partition=gpu", "--qos=short", "--reservation=maint_1", "--mem=16384M", "--cpus-per-task=4", "--exclusive",
        "--mail-user=me@example.org"]
    condor = parse_plan('executor="htcondor"\n[htcondor]\nrequest_memory=4096\nrequest_cpus=2\nrequest_disk="20GiB"\n' + STACK)
    assert condor.executor_options["htcondor"] == {"request_memory": 4096, "request_cpus": 2, "request_disk": 20480}
    k8s = parse_plan('executor="kubernetes"\n[kubernetes]\nimage="python:3.12"\nmemory="8G"\ncpu=2\n' + STACK)
    assert make_executor(k8s, None, False).requests == {"memory": "8192Mi", "cpu": "2"}


def test_max_running_and_build_first_reach_their_executors():
    from gpucompat.executors import make_executor

    slurm = make_executor(parse_plan('executor="slurm"\n[slurm]\nmax_running=4\nbuild_first=true\n' + STACK), None, False)
    assert (slurm.max_running, slurm.build_first, slurm.array_range(24)) == (4, True, "0-23%4")
    assert make_executor(parse_plan('executor="slurm"\n' + STACK), None, False).array_range(24) == "0-23"  # no cap unless asked
    assert make_executor(parse_plan('executor="htcondor"\n[htcondor]\nmax_running=3\n' + STACK), None, False).max_running == 3
    k8s = parse_plan('executor="kubernetes"\n[kubernetes]\nimage="python:3.12"\nmax_running=2\n' + STACK)
    assert make_executor(k8s, None, False).watcher.max_running == 2


@pytest.mark.parametrize("table, expected", [
    ('executor="slurm"\n[slurm]\nmem="lots"\n', "[slurm] mem 'lots' is not an amount of memory"),
    ('executor="slurm"\n[slurm]\ncpus_per_task=0\n', "[slurm] cpus_per_task must be a whole number from 1 to 1024"),
    ('executor="slurm"\n[slurm]\ncpus_per_task=true\n', "[slurm] cpus_per_task must be a whole number"),
    ('executor="slurm"\n[slurm]\nextra_sbatch=["--exclusive\\n#SBATCH --uid=0"]\n', "[slurm] extra_sbatch must be a list of sbatch options"),
    ('executor="slurm"\n[slurm]\nextra_sbatch="--exclusive"\n', "[slurm] extra_sbatch must be a list"),
    ('executor="htcondor"\n[htcondor]\nrequest_memory="0"\n', "outside 1 MiB to 64 TiB"),
    ('executor="htcondor"\n[htcondor]\nrequirements="x"\n', "[htcondor]: unknown key 'requirements'"),
    ('executor="kubernetes"\n[kubernetes]\nimage="python:3.12"\ncpu="2; rm -rf /"\n', "[kubernetes] cpu must be a whole number"),
    ('executor="slurm"\n[slurm]\nmax_running=0\n', "[slurm] max_running must be a whole number from 1 to 100,000"),
    ('executor="slurm"\n[slurm]\nmax_running="4%2"\n', "[slurm] max_running must be a whole number"),
    ('executor="htcondor"\n[htcondor]\nmax_running=true\n', "[htcondor] max_running must be a whole number"),
    ('executor="kubernetes"\n[kubernetes]\nimage="python:3.12"\nmax_running=100001\n', "[kubernetes] max_running must be a whole number"),
    ('executor="slurm"\n[slurm]\nbuild_first="yes"\n', "[slurm] build_first must be true or false, not a string"),
    ('executor="htcondor"\n[htcondor]\nbuild_first=true\n', "[htcondor]: unknown key 'build_first'"),
])
def test_site_resource_mistakes_get_one_sentence(table, expected):
    with pytest.raises(UserError) as raised:
        parse_plan(table + STACK, "plan.toml")
    assert expected in str(raised.value)
