import json

import pytest
from packaging.version import Version

from gpucompat import space
from gpucompat.errors import UserError
from gpucompat.model import Stack, StackSpec
from gpucompat.resolve import cuda_versions, parse_pins, resolve_all, resolve_one

PLATFORM = "x86_64-manylinux_2_28"


def vs(*texts):
    return [Version(t) for t in texts]


def test_latest_n_takes_the_newest_minor_series_and_their_newest_patch():
    available = vs("2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0")
    assert space.pick_versions("latest:2", available) == vs("2.5.1", "2.6.0")
    assert space.pick_versions(">=2.3.1,<2.5", available) == vs("2.3.1", "2.4.1")


def test_requirements_for_each_framework_and_variant():
    assert space.requirements_for("torch", "2.4.1", "default") == (("torch==2.4.1",), None)
    assert space.requirements_for("torch", "2.4.1", "cu118") == (("torch==2.4.1",), "https://download.pytorch.org/whl/cu118")
    assert space.requirements_for("jax", "0.4.30", "cuda12")[0] == ("jax[cuda12]==0.4.30",)
    assert space.requirements_for("tensorflow", "2.15.0", "and-cuda")[0] == ("tensorflow[and-cuda]==2.15.0",)
    assert space.requirements_for("cupy", "13.3.0", "cuda12x")[0] == ("cupy-cuda12x==13.3.0",)
    # the runtime and the same minor series' NVRTC (the probe's JIT rungs compile with it)
    assert space.requirements_for("cuda-runtime", "11.8", "default")[0] == ("nvidia-cuda-runtime-cu11==11.8.*", "nvidia-cuda-nvrtc-cu11==11.8.*")
    assert space.requirements_for("cuda-runtime", "12.4", "default")[0] == ("nvidia-cuda-runtime-cu12==12.4.*", "nvidia-cuda-nvrtc-cu12==12.4.*")
    assert space.requirements_for("cuda-runtime", "13.0", "default")[0] == ("nvidia-cuda-runtime==13.0.*", "nvidia-cuda-nvrtc==13.0.*")
    with pytest.raises(UserError, match="CUDA 11 and newer"):
        space.requirements_for("cuda-runtime", "10.2", "default")


def test_exact_lists_expand_without_the_network(isolated):
    stacks = space.expand(StackSpec("cuda-runtime", ("12.4", "13.0"), ("default",), ("3.11", "3.12"), "uv"), offline=True)
    assert [(s.version, s.python) for s in stacks] == [("12.4", "3.11"), ("12.4", "3.12"), ("13.0", "3.11"), ("13.0", "3.12")]


def test_offline_uses_only_the_cache(isolated):
    with pytest.raises(UserError, match="offline, and no cached version list for 'torch'"):
        space.release_versions("torch", offline=True)
    cached = space.cache_dir() / "pypi" / "torch.json"
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(["2.4.0", "2.4.1", "2.5.0rc1", "2.5.0", "not-a-version"]))
    assert space.release_versions("torch", offline=True) == vs("2.4.0", "2.4.1", "2.5.0")
    stacks = space.expand(StackSpec("torch", "latest:1", ("default",), ("3.11",), "uv"), offline=True)
    assert [s.version for s in stacks] == ["2.5.0"]


def test_pins_give_cuda_and_cudnn():
    pins = parse_pins("torch==2.4.1\nnvidia-cuda-runtime-cu12==12.1.105\nnvidia-cudnn-cu12==9.1.0.70\n# comment\n")
    assert pins == ("torch==2.4.1", "nvidia-cuda-runtime-cu12==12.1.105", "nvidia-cudnn-cu12==9.1.0.70")
    assert cuda_versions(pins) == ("12.1", "9.1.0")
    assert cuda_versions(("torch==2.7.0+cu128",)) == ("12.8", None)
    assert cuda_versions(("nvidia-cuda-runtime==13.0.96",)) == ("13.0", None)


# --- against the real package index, with real uv -------------------------------------------

@pytest.mark.integration
def test_pypi_version_space_is_read_and_cached(isolated):
    versions = space.release_versions("nvidia-cuda-runtime-cu12")
    assert Version("12.4.127") in versions
    assert (space.cache_dir() / "pypi" / "nvidia-cuda-runtime-cu12.json").exists()
    assert space.release_versions("nvidia-cuda-runtime-cu12", offline=True) == versions
    stacks = space.expand(StackSpec("cuda-runtime", "latest:2", ("default",), ("3.11",), "uv"))
    assert len(stacks) == 2 and all(s.requirements[0].endswith(".*") for s in stacks)


@pytest.mark.integration
def test_unknown_pypi_project_is_one_sentence(isolated):
    with pytest.raises(UserError, match="PyPI has no project named"):
        space.release_versions("gpucompat-no-such-project-xyz")


@pytest.mark.integration
def test_real_resolutions_possible_and_impossible():
    def stack(framework, version, python):
        requirements, index = space.requirements_for(framework, version, "default")
        return Stack(framework, version, "default", python, "uv", requirements, index)

    torch_ok, torch_py313, runtime = resolve_all(
        [stack("torch", "2.4.1", "3.11"), stack("torch", "2.4.1", "3.13"), stack("cuda-runtime", "12.4", "3.11")], PLATFORM
    )
    assert torch_ok.ok and (torch_ok.cuda_runtime, torch_ok.cudnn) == ("12.1", "9.1.0")
    assert "torch==2.4.1" in torch_ok.pins
    assert not torch_py313.ok and "cp313" in torch_py313.error
    assert runtime.ok and runtime.cuda_runtime == "12.4"
    assert sorted(p.rsplit(".", 1)[0] for p in runtime.pins) == ["nvidia-cuda-nvrtc-cu12==12.4", "nvidia-cuda-runtime-cu12==12.4"]


@pytest.mark.integration
def test_a_release_that_does_not_exist_is_unresolvable():
    requirements, index = space.requirements_for("torch", "2.4.9", "default")
    result = resolve_one(Stack("torch", "2.4.9", "default", "3.11", "uv", requirements, index), PLATFORM)
    assert not result.ok and "2.4.9" in result.error
