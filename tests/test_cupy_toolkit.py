"""Where CuPy's run-time compiler comes from (issue 40.3): cupy-cudaXXx alone brings no NVRTC, so its answer is
conditional on the system's toolkit, naming the one the GPU needs; with [ctk] it is judged on pip's NVRTC."""

from gpucompat.answers.explain import explain
from gpucompat.knowledge.frameworks import cupy


def test_without_ctk_the_answer_is_conditional_where_any_toolkit_would_do():
    answer = explain("cupy-cuda12x==14.0.0", "H100", None, "580.65.06", "3.12")
    assert (answer["verdict"], answer["code"]) == ("conditional", "NEEDS_SYSTEM_CUDA")
    assert answer["needs"]["text"].startswith("a CUDA 12.x (any release of it knows sm_90) toolkit")
    assert all("[ctk]" in item["spec"] for item in answer["nearest"])  # beside a conditional yes, only what brings its own NVRTC


def test_without_ctk_a_gpu_newer_than_the_builds_cuda_names_the_toolkit_it_needs():
    answer = explain("cupy-cuda12x==14.0.0", "RTX 5090", None, "580.65.06", "3.12")
    assert (answer["verdict"], answer["needs"]["cuda"]) == ("conditional", "12.8")
    assert "12.8 or later" in answer["needs"]["text"] and "cupy-cuda12x[ctk] brings it from pip" in answer["needs"]["why"]


def test_with_ctk_it_is_a_pass_on_pips_nvrtc_and_its_install_line_keeps_the_extra():
    answer = explain("cupy-cuda12x[ctk]==14.2.0", "RTX 5090", None, "580.65.06", "3.12")
    assert answer["verdict"] == "pass" and "needs" not in answer
    assert "cupy-cuda12x[ctk]==14.2.0" in answer["install"]["pip"]


def test_ctk_nvrtc_that_does_not_know_the_gpu_hands_the_driver_ptx_judged_by_isa():
    # cupy-cuda12x[ctk] brings NVRTC 12.9 (PTX ISA 8.8), which has no sm_110 target: only PTX can run there
    refused = cupy.nvrtc_rule("14.2.0", "cuda12x", True, "11.0", "12.0", "570.86.10")  # R570 = CUDA 12.8, ISA 8.7
    assert (refused.verdict, refused.code) == ("fail", "PTX_TOOLCHAIN_TOO_NEW")
    loaded = cupy.nvrtc_rule("14.2.0", "cuda12x", True, "11.0", "12.0", "580.65.06")  # R580 = CUDA 13.0, ISA 9.0
    assert loaded.verdict == "uncertain"  # the PTX loads; whether the precompiled kernels run is not known


def test_a_requirements_file_keeps_ctk_and_a_set_with_pips_nvrtc_is_not_conditional(tmp_path):
    from gpucompat.answers.explain import answer_requirements
    from gpucompat.answers.asked import read

    def judged(text):
        path = tmp_path / "requirements.txt"
        path.write_text(text)
        return answer_requirements(read(None, str(path), None, "H100", None, "580.65.06", "3.12"))["rows"][0]

    assert (judged("cupy-cuda12x==14.2.0\n")["verdict"]) == "conditional"
    assert judged("cupy-cuda12x[ctk]==14.2.0\n")["read_as"] == "cupy-cuda12x[ctk]==14.2.0"
    assert judged("cupy-cuda12x[ctk]==14.2.0\n")["verdict"] == "pass"
    assert judged("cupy-cuda12x==14.2.0\nnvidia-cuda-nvrtc-cu12==12.9.86\n")["verdict"] == "pass"
