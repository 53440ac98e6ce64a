"""The headline says what blocks (issue 40 section 6): the fact the user cannot change, else what fails first."""

from gpucompat.answers.explain import answer_requirements
from gpucompat.answers.asked import read


def test_a_set_pip_cannot_install_is_env_unresolvable_even_where_it_also_mixes_cuda_majors(tmp_path):
    """torch 2.3.1 pins nvidia-cudnn-cu12==8.9.2.26; the file pins 9.1.0.70 (pip cannot install both) and a CUDA 11 cuBLAS:
    it fails at resolve before anything could mix majors at import."""
    path = tmp_path / "requirements.txt"
    path.write_text("torch==2.3.1\nnvidia-cudnn-cu12==9.1.0.70\nnvidia-cublas-cu11==11.11.3.6\n")
    result = answer_requirements(read(None, str(path), None, "A100", None, "550.54.14", "3.11"))
    assert {r["rule"] for r in result["set"] if r["verdict"] == "fail"} == {"one CUDA major", "torch's own pin of nvidia-cudnn-cu12"}
    assert (result["verdict"], result["code"], result["stage"]) == ("fail", "ENV_UNRESOLVABLE", "resolve")


def test_a_kepler_gpu_whose_last_driver_cannot_run_the_build_is_arch_unsupported_not_driver_too_old():
    """Kepler's last branch is R470 (CUDA 11.4; gpu_driver_branches.csv): a CUDA 12 build needs a driver no Kepler GPU
    has, so upgrading the driver is not the way out. The same build on an A100 with R470 stays DRIVER_TOO_OLD."""
    from gpucompat.knowledge.rules import predict_stack, suggest_fix

    kepler = predict_stack("torch", "2.3.1", "default", "3.7", "470.82.01", "3.11", gpu="Tesla K80")
    assert (kepler.verdict, kepler.code, kepler.stage) == ("fail", "ARCH_UNSUPPORTED", "device")
    head = next(r for r in kepler.reasons if r.code == "ARCH_UNSUPPORTED" and r.stage == "device")
    assert "no driver for Kepler GPUs such as Tesla K80 goes past R470 (CUDA 11.4)" in head.text
    assert "upgrade the NVIDIA driver" not in (suggest_fix("torch", "2.3.1", "3.7", "470.82.01", kepler, "Tesla K80") or "")
    assert predict_stack("torch", "2.3.1", "default", "8.0", "470.82.01", "3.11", gpu="A100").code == "DRIVER_TOO_OLD"
    # the GPU's last branch reaches the build's CUDA under minor-version compatibility: still the driver's to change
    assert predict_stack("torch", "2.3.1+cu118", "cu118", "3.7", "440.33.01", "3.11", gpu="Tesla K80").code == "DRIVER_TOO_OLD"
