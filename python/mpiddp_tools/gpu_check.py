"""The GPU check: one call on a machine with a GPU answers everything in one table.

usage: scripts/gpu-check [OUTDIR]      (scripts/gpu-check.sh [OUTDIR] runs the same)

OUTDIR (default: $OUT if set, else /tmp/gpu-check; relative to the repository
root) receives table.txt and every step's log (logs/NAME.log; when OUTDIR is
$OUT, whose files come back at most 8 at a time, the logs are packed into
logs.tar.gz). The table is printed last; each row is PASS, FAIL or SKIP with its
reason:
  gpu_ops, gpu_ddp_2ranks   the gpu tests: CUDA ops against the CPU, finite differences, NCCL; DDP, 2 ranks, 1 GPU
  matmul_bf16               bench matmul: the measured bf16 peak the MLP rows are compared with
  big_mlp_nccl, _staged     bench mlp, 4 layers of 4096, batch 4096, bf16: samples/s, TFLOP/s, share of the
  small_mlp                 matmul peak, exposed communication (--comm both); 784-256-128-10, batch 64, fp32
  fmnist_w1_nccl_{fp32,tf32,bf16}, fmnist_w2_shared_mpi
                            Fashion-MNIST MLP, 15 epochs: world 1 over NCCL, world 2 sharing one GPU over MPI
  zero_w2_shared_bf16       ddp.zero_stage 1 against 0, 2 ranks sharing the GPU over MPI, bf16: a model sized
                            from the free memory (behind a PyTorch ballast) that stage 0 cannot hold and stage 1 trains
                            (18 and 14 bytes per parameter per rank; ZERO_FREE_GIB, ZERO_RANK_RESERVE_GIB: zero_sizing)
  cnn_fmnist_{fp32,bf16}    a small CNN (conv/BatchNorm/ReLU/max-pool/linear) on Fashion-MNIST, 300 steps: the
                            loss must fall (cuDNN convolutions; bf16 convolves with TF32 math for now)
  big_cnn_tf32              bench mlp --layers: a VGG-style CNN on 3x64x64, batch 256: samples/s and TFLOP/s
                            The CNN rows SKIP, with the reason, when this process finds no cuDNN.
  gpt2_124m_bf16            GPT-2 124M (tied head, T 1024, batch 8, 30 steps) on synthetic llm.c tokens, bf16:
                            tokens/s (whole run, and the steady rate of its last 10 steps) and MFU (6 N + 6 L T D
                            FLOPs per token); steps 11-15 are traced, and the GPU's time per layer kind
                            (trace-shares --device) goes into its log beside the trace itself
  gpt2_124m_torch           the same model, batch and steps in PyTorch (scripts/bench_torch_gpt.py: nanoGPT's model,
                            flash attention, autocast bf16, fused AdamW; eager), and mpiddp's steady rate over it
  gpt_kjv_bf16              inputs/kjv_gpt.ini, one epoch in bf16: tokens/s and test loss
  gpu_training              tests/integration/gpu_test_training.sh (loss curve vs the CPU, accuracy, resume)
  sanitizer_memcheck, sanitizer_racecheck
                            a short training under compute-sanitizer (SKIP when it is missing or refuses the GPU;
                            an invalid access or race it reports is a FAIL: sanitizer_outcome)
cuDNN is opened by mpiddp at run time (not carried by the bundle: ~500 MB) from mpiddp's library path: the
toolkit's folders and PyTorch's wheels (site-packages/nvidia/cudnn/lib) as above, and /usr/lib/x86_64-linux-gnu;
the table names the one mpiddp opened.
Binaries: GPU_BUNDLE (gpu-bundle.tar.xz from scripts/gpu-bundle.sh, or an unpacked bundle folder; by default
./gpu-bundle.tar.xz when present), else BUILD_DIR (default build). Only mpiddp, its tests and the bundled
Open MPI see the bundle's libraries (wrappers; python3 and other tools keep the host's).
GPU_CHECK_ONLY=PART,... runs only those parts, in the usual order (a later call's focus, when device time is
short): tests, bench, fmnist, zero, cnn, gpt2, kjv, training, sanitizers; the Fashion-MNIST shards are prepared
for any part that needs them. An unknown part stops the check at once (exit 2).
Time: every step runs under `timeout`, all of them within GPU_CHECK_BUDGET_S (default 390 s: the whole check
then ends within about 400 s, one call of the device tool under 7 minutes). On an H200 (2026-12-04) every step
but the last fitted in 376 s; racecheck (70 s for 20 steps) was then cut by the budget, so it now trains 6 steps
and the ZeRO row 2 (its 3 steps of a 1.5 G-parameter model took 64 s). A step that the budget does not leave
time to start, or that is stopped because the budget ran out (not at its own limit), is a SKIP with that reason.
Exit: 0 when no row failed, 1 when one did; 2 (one line) when it cannot start: a required CUDA library (or
version) is missing; 77 when there is no usable GPU.
GPU_CHECK_DRY_RUN=1 checks the runner itself on a machine without a GPU (CI does, with the system's MPI,
HDF5 and BLAS hidden: tests/integration/test_gpu_check_dry_run.sh): the same steps on the CPU, fp32 over
MPI, short runs and a small MLP; the steps that need a GPU SKIP with the reason. It has no device time to fit:
its default budget is 10 hours and each step's limit 20 times the GPU's, so a slow CPU only makes it slower.
The runner needs only the Python standard library; python3 on PATH is asked for PyTorch's CUDA libraries
and runs the ZeRO row's ballast (PyTorch), as the GPU machine's python3 has them.
"""
import collections
import glob
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .errors import one_line
from .runs import read_records, read_summary

# The time budget (GPU_CHECK_BUDGET_S). The whole check must fit in one call of the device tool of under 7 minutes
# (420 s; the tool allows 600). Every step's limit is trimmed to what is left of the budget, less its kill grace, so
# no step runs past the deadline; outside the budget are only the start (Python, a temporary folder: under a second),
# and the end (the logs packed, the scratch folder removed: a few seconds). 390 + ~10 < 420.
# The per-step limits (GPU run) are hang guards, not a plan: gpu_ops 150, gpu_ddp_2ranks 120, matmul_bf16 60,
# big_mlp_nccl 90, big_mlp_staged 90, small_mlp 60, big_cnn_tf32 90, prepare_fmnist 120, the four fmnist rows 4 x 120,
# zero_w2_shared_bf16 120 + 180, the two cnn rows 2 x 120, gpt2 60 + 180 + 120 (PyTorch), kjv 2 x 60 + 240,
# gpu_training 240, the two sanitizer rows 2 x 120: 2940 s in all, and each alone below the budget. What is expected
# to fit is the steps' real durations (376 s for all but racecheck on an H200, 2026-12-04, before the PyTorch row:
# about 20 s more, and racecheck and ZeRO were shortened by about 70 s); a row the budget cuts short or never
# reaches is a SKIP with the reason, never a FAIL, and the check still ends in time.
DEFAULT_BUDGET_S = 390
# The dry run has no device time to fit: on a slow or busy CPU (CI pinned to one core) its CPU steps may take many
# times their GPU limits, which are sized for an H200. Its default budget and limits are therefore far larger.
DRY_RUN_BUDGET_S = 36000
DRY_RUN_LIMIT_SCALE = 20
KILL_GRACE_S = 10  # timeout -k: a step that ignores SIGTERM at its limit is killed this much later
MIN_STEP_S = 15    # a step with less than this left of the budget is not started
BUDGET_SPENT = "time budget (GPU_CHECK_BUDGET_S) spent"
BUDGET_RAN_OUT = "time budget (GPU_CHECK_BUDGET_S) ran out during the step"
# The CUDA libraries mpiddp links; without one it cannot start. (cuBLAS, opened at run time, is checked through
# `mpiddp inspect devices`.)
REQUIRED = ("libcudart.so.13", "libnccl.so.2")
NO_SHARDS = "no shards (prepare_fmnist did not pass)"
# PyTorch's wheels' CUDA libraries, as python3 finds them (site-packages/nvidia/*/lib).
FIND_NVIDIA = """import glob, os, nvidia
for root in list(nvidia.__path__): print("\\n".join(sorted(glob.glob(os.path.join(root, "*", "lib")))))"""
NVIDIA_IN_VENVS = ("/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
                   "/usr/local/lib/python3*/dist-packages/nvidia/*/lib")
# Fills the GPU but for sys.argv[1] GiB, says so in sys.argv[2], and holds it.
BALLAST = """
import sys, time, torch
free, total = torch.cuda.mem_get_info()
keep = int(float(sys.argv[1]) * 2**30)
ballast = torch.empty(max(0, free - keep), dtype=torch.uint8, device="cuda")
open(sys.argv[2], "w").write("ready")
time.sleep(900)"""
# A VGG-style CNN: convolutions are most of its FLOPs (counted from the geometry by bench mlp).
BIG_CNN = ["--input-shape", "3,64,64", "--outputs", "100", "--batch", "256", "--steps", "20", "--layers",
           "conv2d(64,3,padding=1) batchnorm2d relu\n"
           "  conv2d(128,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(256,3,padding=1) batchnorm2d relu\n"
           "  conv2d(256,3,padding=1) batchnorm2d relu maxpool2d(2) "
           "conv2d(512,3,padding=1) batchnorm2d relu maxpool2d(2)\n"
           "  flatten linear(512) relu linear"]
SMALL_CNN = ("conv2d(16,3,padding=1) batchnorm2d relu maxpool2d(2)\n"
             "    conv2d(32,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear(64) relu linear")


def lines_of(path):
    """A file's lines as grep sees them; [] when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def first(lines, pattern, flags=0):
    """The first line that PATTERN matches (re.search), or ""."""
    return next((line for line in lines if re.search(pattern, line, flags)), "")


def output(command, env=None):
    """A command's standard output, its errors thrown away; "" when it cannot run."""
    try:
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                              stdin=subprocess.DEVNULL, text=True, errors="replace").stdout
    except OSError:
        return ""


def executable(path):
    return os.access(path, os.X_OK)


def write_wrapper(path, environment, program, arguments=()):
    """PATH runs PROGRAM ARGUMENTS... "$@" under `env ENVIRONMENT...` (VAR=value words)."""
    words = " ".join(shlex.quote(word) for word in [*environment, program, *arguments])
    with open(path, "w") as f:
        f.write(f'#!/usr/bin/env bash\nexec env {words} "$@"\n')
    os.chmod(path, 0o755)


def cuda_dirs():
    """The folders of CUDA's libraries: the toolkit's, then those of PyTorch's wheels (site-packages/nvidia/*/lib:
    cu13/lib holds cudart and cuBLAS, nccl/lib NCCL) as python3 finds them, or in the usual virtual environments."""
    dirs = [d for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib") if os.path.isdir(d)]
    try:
        found = subprocess.run(["python3", "-c", FIND_NVIDIA], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, text=True, errors="replace")
        wheels = found.stdout.split("\n") if found.returncode == 0 else None
    except OSError:
        wheels = None
    if wheels is None:
        wheels = [path for pattern in NVIDIA_IN_VENVS for path in glob.glob(pattern)]
    return dirs + [d for d in sorted(set(wheels)) if d]


def bench_detail(log, peak):
    """(ok, text) of a bench mlp log: samples/s, TFLOP/s and share of the matmul PEAK (text; "" for none) of the
    first mode, and the exposed communication."""
    text = "\n".join(lines_of(log))
    modes = re.findall(r"^(with all-reduce|no communication)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text, re.M)
    if not modes:
        return False, "no timing rows in the output"
    try:
        peak = float(peak) if peak else 0.0
        ms, rate, tflops = float(modes[0][1]), float(modes[0][2]), float(modes[0][3])
    except ValueError as e:
        return False, one_line(e)
    share = f"{100 * tflops / peak:.0f}% of matmul peak" if peak else "no matmul peak"
    exposed = re.search(r"exposed communication: ([\d.]+)%", text)
    return True, (f"{rate:.0f} samples/s, {ms:.2f} ms/step, {tflops:.1f} TFLOP/s = {share}"
                  + (f", exposed comm {exposed.group(1)}%" if exposed else ""))


def fmnist_detail(summary_path, floor):
    """(ok, text) of a Fashion-MNIST run: its accuracy against FLOOR; text None without a usable summary."""
    s = read_summary(summary_path)
    try:
        acc = s.get("test_accuracy", 0.0)
        text = (f"accuracy {acc:.4f} (floor {floor}), {s['train_samples_per_s']:.0f} samples/s, {s['wall_s']:.1f} s, "
                f"{s['epochs']} epochs")
    except (KeyError, TypeError, ValueError):
        return False, None
    return acc >= floor, text


def gpt_layers(blocks, width, heads):
    """nanoGPT's GPT as a layer list: token and position embeddings, pre-LayerNorm blocks, a head tied to wte."""
    block = (f"residual(layernorm causal_self_attention({heads})) "
             f"residual(layernorm linear({4 * width}) gelu(approximate=tanh) linear({width}))")
    return f"embedding(V,{width}) position_embedding " + " ".join([block] * blocks) + " layernorm linear(tie=0)"


def gpt_detail(summary_path, blocks, context, width, peak):
    """(ok, text) of a GPT run: tokens/s, and the model FLOP utilisation as llm.c counts it, 6 N + 6 L T D FLOPs
    per token against the measured bf16 matmul PEAK (TFLOP/s text; "" for none); the test loss when evaluated."""
    s = read_summary(summary_path)
    try:
        tokens_s, params = float(s["train_tokens_per_s"]), s["parameter_bytes"] / 4
        flops = 6 * params + 6 * blocks * context * width
        mfu = f", MFU {100 * tokens_s * flops / (float(peak) * 1e12):.1f}% of {peak} TFLOP/s" if peak else ""
        loss = (f", test loss {s['test_loss']:.4f} nats/token ({s['test_bits_per_token']:.3f} bits)"
                if s.get("test_loss", -1) >= 0 else "")
        text = f"{tokens_s:.0f} tokens/s, {params / 1e6:.1f} M parameters{mfu}{loss}, {s['steps']} steps"
        return tokens_s > 0, text
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return False, None


def torch_cuda_usable(log):
    """Whether python3 on PATH imports PyTorch and sees a GPU; what it said goes into LOG (written afresh)."""
    with open(log, "w") as f:
        try:
            return subprocess.call(["python3", "-c", "import torch; assert torch.cuda.is_available()"],
                                   stdout=f, stderr=subprocess.STDOUT) == 0
        except OSError as e:
            f.write(f"python3: {e.strerror}\n")
            return False


def last_line(log):
    """A log's last line, cut to 100 characters ("" for none)."""
    lines = lines_of(log)
    return lines[-1][:100] if lines else ""


def last_logged_rate(log, unit, pattern=None):
    """The last rate a log printed: "N tokens/s" on mpiddp's progress lines ("epoch ... step ..."), or PATTERN's
    number; 0.0 when there is none."""
    rate = 0.0
    for line in lines_of(log):
        found = (re.search(pattern, line) if pattern else
                 re.search(rf"^epoch .* step .* ([\d.]+) {re.escape(unit)}", line))
        if found:
            rate = float(found.group(1))
    return rate


def write_llmc_shard(path, tokens, vocab, seed):
    """An llm.c token file of TOKENS seeded random ids below VOCAB (the synthetic data of the GPT-2 row)."""
    import array
    import random
    rng = random.Random(seed)
    header = array.array("i", [20240520, 1, tokens] + [0] * 253)
    ids = array.array("H", (rng.randrange(vocab) for _ in range(tokens)))
    with open(path, "wb") as f:
        header.tofile(f)
        ids.tofile(f)


def zero_detail(summary_path, params):
    """(ok, text) of ZeRO stage 1's run: its peak device memory per rank below what stage 0's parameters, gradients
    and AdamW moments alone hold (16 bytes per parameter). peak_device_bytes counts mpiddp's own allocations, not the
    layers' bf16 weight copies (2 more bytes at both stages) nor the CUDA context: like is compared with like."""
    s = read_summary(summary_path)
    try:
        peak = s["peak_device_bytes"]
        text = (f"stage 0 out of memory, stage 1 trained: peak device {peak / 2**30:.2f} GiB/rank "
                f"(stage 0's state alone would be {16 * params / 2**30:.2f}), state "
                f"{s['optimizer_state_bytes_per_rank'] / 2**30:.2f} GiB/rank, {s['train_samples_per_s']:.0f} samples/s")
        return 0 < peak < 16 * params, text
    except (KeyError, TypeError, ValueError):
        return False, None


def cnn_detail(run_dir):
    """(ok, text) of a CNN run: its logged training loss fell well below chance (ln 10 = 2.30) and ended below where
    it started."""
    try:
        losses = [r["loss"] for r in read_records(os.path.join(run_dir, "metrics.jsonl")) if r.get("type") == "train"]
    except (OSError, KeyError, ValueError):
        return False, None
    if len(losses) < 2:
        return False, f"only {len(losses)} logged losses"
    s = read_summary(os.path.join(run_dir, "summary.json"))
    try:
        text = (f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {s['steps']} steps, "
                f"{s['train_samples_per_s']:.0f} samples/s")
        return losses[-1] < losses[0] and losses[-1] < 1.0, text
    except (KeyError, TypeError, ValueError):
        return False, None


# compute-sanitizer's output, line by line: its own lines start with its prefix, "========= " by default.
SANITIZER_LINE = r"^=+ "
# Its wordings for "I cannot check on this device, driver or installation", matched anywhere (no program of ours
# prints them; CUDA's own error strings say "operation not supported", "insufficient", "unsupported display driver"):
# "Device not supported" (an unsupported GPU, or a virtualized one: seen under gVisor, the GPU machine's other
# runtime, followed by error 999 at the first allocation), "... not supported on this device/GPU/platform", an
# unsupported or incompatible driver, and a missing injection library (a broken installation: nothing is
# instrumented).
SANITIZER_REFUSED = (r"device (is )?not supported|not supported on this (device|gpu|platform|system)"
                     r"|unsupported (device|gpu|platform)"
                     r"|driver( version)? (is )?(not supported|unsupported|incompatible)"
                     r"|unable to find (the )?injection library")
# Only on the sanitizer's own lines: words the program under it could print too.
SANITIZER_REFUSED_OWN = r"(unable|failed) to (attach|initialize)|no attachable process"
# What it reports only after instrumenting kernels, so the device was not refused: memcheck's invalid and misaligned
# accesses, out-of-bounds addresses, leaks and malloc/free errors, hardware exceptions; racecheck's races and hazards;
# initcheck's uninitialized reads; synccheck's barrier errors.
SANITIZER_FINDING = (r"^=+ +(Error: |Warning: )?(Invalid (__global__|__shared__|__local__|global|shared|local"
                     r"|generic|PC)|Misaligned|Out-of-range|Address 0x[0-9a-f]+ is out of bounds|Uninitialized "
                     r"|Race reported|(Potential )?(RAW|WAR|WAW) hazard|.*hazard detected|Barrier error"
                     r"|Divergent thread|Malloc/Free error|Leaked [0-9]+ bytes|Hardware Stack Overflow"
                     r"|Illegal (address|instruction))")
# "ERROR SUMMARY: 3 errors", "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)".
SANITIZER_SUMMARY = r"(ERROR|RACECHECK) SUMMARY: ([0-9]+)"


def sanitizer_outcome(lines, rc):
    """(verdict, detail) of a run under compute-sanitizer with --error-exitcode 86 from its output LINES and exit
    status RC, or None when its output decides nothing (then the step's usual verdict: PASS on exit 0, else FAIL,
    or SKIP for the time budget).
    - A finding (an invalid access, a race, ...) is a FAIL: the sanitizer instrumented the kernels, whatever else
      its output says.
    - Else a refusal of the device, driver or installation (SANITIZER_REFUSED) is a SKIP with its line: nothing
      was checked. The errors that follow one (error 999 at the first allocation under gVisor, counted in "ERROR
      SUMMARY: 1 error", the program's own exit and "Target application returned an error") are its consequences.
    - Else errors it counted (exit 86, or a summary of 1 or more) are a FAIL with the summary and the first error.
    "Target application returned an error" alone only says the program failed: no refusal, the usual verdict."""
    def strip(line):
        return re.sub(SANITIZER_LINE, "", line, count=1).strip()
    summary = strip(first(lines, SANITIZER_SUMMARY))
    finding = first(lines, SANITIZER_FINDING, re.I)
    if finding:
        return "FAIL", f"{summary or 'errors'}: {strip(finding)[:120]}"
    refused = first(lines, SANITIZER_REFUSED, re.I) or first(
        [line for line in lines if re.match(SANITIZER_LINE, line)], SANITIZER_REFUSED_OWN, re.I)
    if refused:
        return "SKIP", f"compute-sanitizer refused the GPU: {strip(refused)[:120]}"
    counted = re.search(SANITIZER_SUMMARY, summary)
    if rc == 86 or (counted and int(counted.group(2)) > 0):
        error = strip(first(lines, r"^=+ +(Error:|Program hit)"))[:120]
        return "FAIL", f"{summary or 'errors'}" + (f": {error}" if error else "")
    return None


# ---- the ZeRO row's model: stage 0 cannot hold it, stage 1 can ----
ZERO_RANKS = 2  # sharing the one GPU
# Device bytes per parameter on each rank at the peak of a bf16 AdamW step (the MLP's weights are nearly all of its
# parameters; the 2 x 64 x H activations and their bf16 copies are in the reserve below):
#   fp32 parameters 4 + fp32 gradients 4 (the flat gradient buffer is full size at every stage: docs/zero.md, "Stage
#   2 is not done") + AdamW's two fp32 moments 8 at stage 0, 8 / 2 ranks = 4 at stage 1 (each rank its shard)
#   + the bf16 copy of each Linear's weights that forward makes and keeps for backward 2 (src/ops/dense/
#   cuda_dense_ops.cpp; layer scratch, which summary.json's peak_device_bytes does not count).
STAGE0_BYTES = 4 + 4 + 8 + 2                # 18
STAGE1_BYTES = 4 + 4 + 8 // ZERO_RANKS + 2  # 14
# What each rank holds besides, the same at both stages: the CUDA context (~0.5 GiB), the modules mpiddp loads
# eagerly (it sets CUDA_MODULE_LOADING=EAGER: cuBLAS, cuBLASLt, NCCL and its own kernels), cuBLAS's workspace, the
# activations, the batch slots and the allocator's rounding. 3 GiB per rank is reserved (ZERO_RANK_RESERVE_GIB
# changes it); on an H200 (2026-12-04) the row passed with it: stage 1 peaked at 16.9 GiB per rank of mpiddp's own.
ZERO_RESERVE_GIB = 3
# What the ballast leaves free (ZERO_FREE_GIB). The sizing below needs more than 9 reserves (27 GiB); 48 GiB gives
# 2.6 GiB of margin each way and an MLP of about 1.5 G parameters (hidden ~38,500: one layer's weights stay below
# 2^31 elements, each rank's shard below MPI's int counts), which two ranks' host memory and 3 steps handle quickly.
ZERO_FREE_GIB = 48


def mlp_parameters(hidden):
    """Parameters of the ZeRO row's MLP 784-H-H-10 (inputs/fmnist_mlp.ini with model.hidden H,H): weights
    784 H + H^2 + 10 H, biases 2 H + 10."""
    return hidden * hidden + 796 * hidden + 10


class ZeroSizing(collections.namedtuple("ZeroSizing", "params hidden free reserve stage0_need stage1_need margin")):
    """zero_sizing's answer; bytes, but for params and hidden."""

    def text(self):
        """The row's account of the sizing."""
        gib = 2**30
        return (f"free {self.free / 2**20:.0f} MiB, hidden {self.hidden},{self.hidden} ({self.params} parameters): "
                f"stage 0 needs {self.stage0_need / gib:.1f} GiB ({STAGE0_BYTES} B/parameter x {ZERO_RANKS}), "
                f"stage 1 {self.stage1_need / gib:.1f} GiB ({STAGE1_BYTES} B/parameter and "
                f"{self.reserve / gib:g} GiB reserved, per rank)")


def zero_sizing(free_mib, reserve_gib=ZERO_RESERVE_GIB):
    """The ZeRO row's model from the GPU's free memory F (MiB, as nvidia-smi says it) and the reserve R per rank
    (GiB): (ZeroSizing, "") or (None, why not). stage0_need is what the 2 ranks' stage-0 state alone needs (no
    overhead at all), stage1_need what 2 ranks need at stage 1 with R each, margin = stage0_need - F = F -
    stage1_need.
    Stage 0 must not fit even with no overhead: 2 x 18 P > F. Stage 1 must fit with the reserve: 2 x (14 P + R) < F.
    P is where the two margins are equal: 36 P - F = F - 28 P - 2 R, so P = (F - R) / 32, and each margin is
    (F - 9 R) / 8: there is such a P only when F > 9 R (27 GiB for R = 3). For 80 GiB free: P = 77 GiB / 32
    (2.58 G parameters), stage 0 needs 86.6 GiB, stage 1 67.4 + 6 = 73.4 GiB, 6.6 GiB of margin each way.
    The hidden width is the largest H with mlp_parameters(H) <= P; the needs are that model's."""
    try:
        free, reserve = float(free_mib) * 2**20, float(reserve_gib) * 2**30
        if not (math.isfinite(free) and math.isfinite(reserve) and reserve >= 0):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        return None, f"not numbers: free '{free_mib}' MiB, reserve '{reserve_gib}' GiB per rank"
    n, b0, b1 = ZERO_RANKS, STAGE0_BYTES, STAGE1_BYTES
    target = (2 * free - n * reserve) / (n * (b0 + b1))  # the P of equal margins
    hidden = int((-796 + math.sqrt(796**2 + 4 * (target - 10))) / 2) if target > 10 else 0
    while hidden > 0 and mlp_parameters(hidden) > target:
        hidden -= 1  # float rounding
    params = mlp_parameters(hidden)
    stage0_need, stage1_need = n * b0 * params, n * (b1 * params + reserve)
    if hidden < 64 or not stage0_need > free or not stage1_need < free:
        least = n * b0 * reserve / (b0 - b1)  # F > 9 R
        return None, (f"{free / 2**30:.1f} GiB free is too little to size it: stage 0 must not fit and stage 1 must "
                      f"with {reserve / 2**30:g} GiB reserved per rank, which needs over {least / 2**30:.0f} GiB")
    if -(-params // n) > 2**31 - 1:
        return None, (f"{params} parameters: a rank's shard would pass MPI's int counts (mpiddp refuses that at "
                      f"stage 1); lower ZERO_FREE_GIB")
    return ZeroSizing(params, hidden, free, reserve, stage0_need, stage1_need, free - stage1_need), ""


class Check:
    """The table, its rows and the steps' bookkeeping: after run_step, rc (an exit status, or "budget" when too
    little of the time budget was left to start the step), secs (its whole seconds), timed_out (stopped at its
    limit) and cut (stopped at a limit that the budget had trimmed: the budget ran out, not the step's own time; the
    reason, else "") describe the step."""

    def __init__(self, out, budget_s):
        self.start = time.monotonic()
        self.out, self.logs, self.table = out, os.path.join(out, "logs"), os.path.join(out, "table.txt")
        self.deadline = budget_s  # in seconds() from start
        self.rc, self.secs, self.failed, self.cut, self.timed_out = 0, 0, 0, "", False
        self.limit_scale = 1  # each step's own limit times this

    def seconds(self):
        """Whole seconds since the check began (bash's SECONDS)."""
        return int(time.monotonic() - self.start)

    def left(self):
        """Whole seconds a step may still run: the budget left, less the kill grace and 5 s for the bookkeeping."""
        return self.deadline - self.seconds() - KILL_GRACE_S - 5

    def log(self, name):
        return os.path.join(self.logs, f"{name}.log")

    def add(self, text):
        with open(self.table, "a") as f:
            f.write(text + "\n")

    def stop(self, message, code):
        """MESSAGE into the table and on stderr, then exit CODE."""
        self.add(message)
        print(message, file=sys.stderr)
        sys.exit(code)

    def die(self, message):
        self.stop(f"gpu-check: error: {message}", 2)

    def row(self, name, verdict, detail):
        self.add(f"{name:<22} {verdict:<4} {self.secs:>5}  {detail}")
        if verdict == "FAIL":
            self.failed = 1

    def skip(self, name, detail):
        """A SKIP row for a step that did not run (0 s)."""
        self.secs = 0
        self.row(name, "SKIP", detail)

    def run_step(self, name, limit, command, env=None):
        """COMMAND under `timeout`, within the budget, its output in NAME's log. The limit shrinks to what is left
        (left()), so that even a step killed after the grace ends before the deadline; with less than MIN_STEP_S
        left it does not start (rc "budget")."""
        left, start, started = self.left(), self.seconds(), time.monotonic()
        self.secs, self.rc, self.cut, self.timed_out = 0, 0, "", False
        if left < MIN_STEP_S:
            self.rc = "budget"
            with open(self.log(name), "w") as f:
                f.write("gpu-check: not started: the time budget is spent\n")
            return
        own, limit = limit * self.limit_scale, min(limit * self.limit_scale, left)
        with open(self.log(name), "w") as f:
            try:
                self.rc = subprocess.run(["timeout", "-k", str(KILL_GRACE_S), str(limit), *command], stdout=f,
                                         stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {}))).returncode
            except OSError as e:
                f.write(f"gpu-check: cannot run timeout: {e.strerror}\n")
                self.rc = 127
        if self.rc < 0:
            self.rc = 128 - self.rc  # killed by signal N: the shell's 128 + N
        self.secs = self.seconds() - start
        # 124: timeout stopped it; 137: killed, by timeout after the grace, or by something else (the kernel's OOM
        # killer) before the limit: no time-out. Only a stop at a limit the budget trimmed is the budget's doing.
        self.timed_out = self.rc in (124, 137) and time.monotonic() - started >= limit
        if self.timed_out:
            if limit < own:
                self.cut = f"{BUDGET_RAN_OUT} (stopped after {limit} s of its {own})"
            with open(self.log(name), "a") as f:
                f.write(f"gpu-check: {self.cut or f'stopped after {limit} s'}\n")

    def budget_reason(self):
        """Why the last step has no verdict of its own, when the budget is the reason: it was not started, or it was
        stopped because the budget ran out. "" otherwise."""
        return BUDGET_SPENT if self.rc == "budget" else self.cut

    def why(self, name):
        """Why a step failed, in one line: its error line, else its last line."""
        lines = lines_of(self.log(name))
        line = first(lines, r"^(mpiddp[a-z ]*: error:|FAIL:|gpu-check:)") or \
            next((line for line in reversed(lines) if line.strip()), "")
        return line[:150]

    def verdict(self, name, detail):
        """The row for the usual outcomes; DETAIL is the PASS text."""
        if self.rc == 0:
            self.row(name, "PASS", detail)
        elif self.rc == 77:
            skipped = re.search(r"SKIPPED: .*", first(lines_of(self.log(name)), r"SKIPPED: "))
            self.row(name, "SKIP", skipped.group(0)[9:160] if skipped else "")
        elif self.budget_reason():
            self.row(name, "SKIP", self.budget_reason())
        elif self.timed_out:
            self.row(name, "FAIL", f"timed out: {self.why(name)}")
        else:
            self.row(name, "FAIL", f"exit {self.rc}: {self.why(name)}")


    def sanitizer_row(self, name):
        """The row of a step run under compute-sanitizer: sanitizer_outcome's, else the usual verdict."""
        lines = lines_of(self.log(name))
        outcome = sanitizer_outcome(lines, self.rc)
        if outcome:
            return self.row(name, *outcome)
        summary = first(lines, SANITIZER_SUMMARY)
        self.verdict(name, re.sub(SANITIZER_LINE, "", summary, count=1).strip() or "no summary line")


class GpuCheck(Check):
    def __init__(self, src, out, scratch, background):
        open(os.path.join(out, "table.txt"), "w").close()
        dry = bool(os.environ.get("GPU_CHECK_DRY_RUN"))
        budget = os.environ.get("GPU_CHECK_BUDGET_S") or str(DRY_RUN_BUDGET_S if dry else DEFAULT_BUDGET_S)
        super().__init__(out, int(budget) if budget.strip().isdigit() else 0)
        if not budget.strip().isdigit():
            self.die(f"GPU_CHECK_BUDGET_S={budget}: not a whole number of seconds")
        self.src, self.scratch, self.background = src, scratch, background
        self.dry = dry
        if dry:
            self.limit_scale = DRY_RUN_LIMIT_SCALE
        self.one_gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        self.peak = ""  # the measured bf16 matmul peak (TFLOP/s text), once the bench part has run
        self.fmnist_prepared = False  # the Fashion-MNIST shards were asked for (prepare_fmnist runs once)
        self.gpt2_steady = 0.0  # the GPT-2 row's steady tokens/s, for the PyTorch row's ratio
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                          OMPI_MCA_rmaps_base_oversubscribe="1")

    def run(self):
        only = self.parts_asked()
        os.makedirs(os.path.join(self.scratch, "bin"))
        self.binaries()
        self.machine()
        self.add(f"\n{'STEP':<22} {'':<4} {'SEC':>5}  RESULT")
        for part, step in self.parts():
            if only is None or part in only:
                step()
        return self.finish()

    def parts(self):
        """The check's parts in their order, as GPU_CHECK_ONLY names them."""
        return [("tests", self.gpu_tests), ("bench", self.benchmarks), ("fmnist", self.fashion_mnist),
                ("zero", self.zero_row), ("cnn", self.cnn_rows), ("gpt2", self.gpt2_rows), ("kjv", self.kjv_row),
                ("training", self.gpu_training), ("sanitizers", self.sanitizers)]

    def parts_asked(self):
        """The set GPU_CHECK_ONLY names (None: every part); an unknown name stops the check."""
        asked = [word.strip() for word in os.environ.get("GPU_CHECK_ONLY", "").split(",") if word.strip()]
        known = [part for part, _ in self.parts()]
        unknown = [word for word in asked if word not in known]
        if unknown:
            self.stop(f"GPU_CHECK_ONLY: unknown part(s) {', '.join(unknown)} (known: {', '.join(known)})", 2)
        return set(asked) if asked else None

    def cnn_rows(self):
        self.cnn("cnn_fmnist_fp32", "fp32")
        self.cnn("cnn_fmnist_bf16", self.bf16)

    # ---- the binaries, and the libraries only they see ----
    def binaries(self):
        host_ld = os.environ.get("LD_LIBRARY_PATH", "")
        bundle = os.environ.get("GPU_BUNDLE", "")
        if not bundle and os.path.isfile("gpu-bundle.tar.xz"):
            bundle = os.path.join(self.src, "gpu-bundle.tar.xz")
        if bundle:
            if os.path.isfile(bundle):
                if subprocess.call(["tar", "-xJf", bundle, "-C", self.scratch]) != 0:
                    self.die(f"cannot unpack {bundle}")
                bundle = os.path.join(self.scratch, "gpu-bundle")
            bundle = os.path.abspath(bundle) if os.path.isdir(bundle) else bundle
            if not executable(os.path.join(bundle, "bin", "mpiddp")):
                self.die(f"{bundle} is not a bundle from scripts/gpu-bundle.sh (no bin/mpiddp)")
            self.bin = self.tests = os.path.join(bundle, "bin")
            self.fmnist_src = os.path.join(bundle, "data")
            ompi = os.path.join(bundle, "ompi")
            lib_path = f"{bundle}/lib:{bundle}/ompi/lib/x86_64-linux-gnu/openmpi/lib"
        else:
            build = os.environ.get("BUILD_DIR") or "build"
            if not os.path.isdir(build):
                self.die(f"no build folder {build} (and no gpu-bundle.tar.xz)")
            self.bin = os.path.abspath(build)
            self.tests = os.path.join(self.bin, "tests")
            self.fmnist_src = os.environ.get("FMNIST_DIR") or "/usr/share/datasets/fashion-mnist"
            ompi, lib_path = "", ""
        self.bundle = bundle
        if not executable(os.path.join(self.bin, "mpiddp")):
            self.die(f"{self.bin}/mpiddp not found")
        found = cuda_dirs()
        for d in found:
            lib_path = f"{lib_path}:{d}" if lib_path else d
        # cuDNN: mpiddp opens libcudnn.so.9 from the first folder on its path that holds it (the order above: the
        # bundle's libraries stay first); the system's folder is added last, in case the loader's cache lacks it.
        cudnn_dir = next((d for d in [*found, "/usr/lib/x86_64-linux-gnu"]
                          if os.path.exists(os.path.join(d, "libcudnn.so.9"))), "")
        if cudnn_dir and f":{cudnn_dir}:" not in f":{lib_path}:":
            lib_path = f"{lib_path}:{cudnn_dir}" if lib_path else cudnn_dir
        self.lib_path = lib_path
        self.mpiddp_ld = lib_path + (f":{host_ld}" if host_ld else "")

        # Wrappers in scratch/bin run each program with mpiddp's library path.
        wrappers = os.path.join(self.scratch, "bin")
        ld = f"LD_LIBRARY_PATH={self.mpiddp_ld}"
        write_wrapper(os.path.join(wrappers, "mpiddp"), [ld], os.path.join(self.bin, "mpiddp"))
        for test in ("gpu_tests", "mpi_tests"):
            if executable(os.path.join(self.tests, test)):
                write_wrapper(os.path.join(wrappers, test), [ld], os.path.join(self.tests, test))
        if ompi:
            # The bundled Open MPI under OPAL_PREFIX, its PMIx's components under PMIX_PKGLIBDIR (PMIx ignores
            # PMIX_INSTALL_PREFIX and mca_base_component_path for them). Its site defaults (the host's
            # /etc/openmpi, which a bare machine lacks) are given here instead, as Debian sets them: no UCX,
            # libfabric (ofi) or InfiniBand components.
            pmix = f"{ompi}/lib/x86_64-linux-gnu/pmix2"
            ompi_env = [f"OPAL_PREFIX={ompi}", f"PMIX_INSTALL_PREFIX={pmix}", f"PMIX_PKGLIBDIR={pmix}/lib/pmix",
                        "OMPI_MCA_pml=^ucx", "OMPI_MCA_btl=^uct,openib,ofi", "OMPI_MCA_mtl=^ofi",
                        "OMPI_MCA_osc=^ucx,pt2pt", "OMPI_MCA_btl_base_warn_component_unused=0"]
            mpirun = f"{ompi}/bin/orterun"
        else:
            ompi_env, mpirun = [], shutil.which("mpirun")
            if not mpirun:
                self.die("no mpirun on PATH (and no bundle)")
        # The ranks get the host's library path back (-x): mpiddp's wrapper sets its own,
        # and anything else mpirun starts (compute-sanitizer) must not see the bundle's.
        write_wrapper(os.path.join(wrappers, "mpirun"), [ld, *ompi_env], mpirun, ["-x", f"LD_LIBRARY_PATH={host_ld}"])
        self.mpiddp, self.mpirun = os.path.join(wrappers, "mpiddp"), os.path.join(wrappers, "mpirun")

    # ---- what the machine has; stop at once when something required is missing ----
    def machine(self):
        host = os.environ["HOSTNAME"] if "HOSTNAME" in os.environ else socket.gethostname()
        self.add(f"gpu-check {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {host or '?'}"
                 + (" (DRY RUN: CPU numbers, no GPU)" if self.dry else ""))
        self.add(f"binaries: {self.bundle or self.bin}")
        gpus = output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
        self.add("\n".join(f"GPU: {gpus.rstrip(chr(10)) or 'none (nvidia-smi found nothing)'}".split("\n")[:2]))
        binary, ldd_log = os.path.join(self.bin, "mpiddp"), self.log("ldd")
        env = dict(os.environ, LD_LIBRARY_PATH=self.mpiddp_ld)
        with open(ldd_log, "w") as f:
            subprocess.call(["ldd", binary], stdout=f, stderr=subprocess.STDOUT, env=env)
        ldd = lines_of(ldd_log)
        for lib in REQUIRED:
            if first(ldd, rf"^\s*{re.escape(lib)} => not found"):
                self.die(f"required CUDA library {lib} not found (searched: {self.lib_path or 'nothing'}, "
                         f"the host's LD_LIBRARY_PATH and ld.so.cache)")
        missing = first(ldd, "=> not found")
        if missing:
            self.die(f"library {missing.split()[0]} not found for mpiddp (see {ldd_log})")
        # A library older than the build's lacks some of the functions mpiddp itself calls.
        checked = subprocess.run(["ldd", "-r", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                 text=True, errors="replace").stdout
        unresolved = [line for line in checked.split("\n") if f"({binary})" in line]
        old = first(unresolved, r"undefined symbol: (cuda|nccl)")
        if old:
            self.die(f"a CUDA library is older than the one mpiddp was built with: {old.replace(chr(9), ' ')}")
        for line in ldd:
            if re.search(r"lib(cudart|nccl)\.so", line):
                fields = line.split()
                self.add(f"  {fields[0]} -> {fields[2] if len(fields) > 2 else ''}")
        with open(self.log("devices"), "w") as f:
            subprocess.call([self.mpiddp, "inspect", "devices"], stdout=f, stderr=subprocess.STDOUT)
        devices = lines_of(self.log("devices"))
        # "cuBLAS yes: 13.x (file)" or "cuBLAS no - why": every GPU product needs it.
        cublas = first(devices, r"^cuBLAS")
        if cublas:
            self.add(f"  {cublas}")
        if cublas.startswith("cuBLAS no - ") and not self.dry:
            self.die(f"required CUDA library cuBLAS: {cublas[len('cuBLAS no - '):]}")
        # "cuDNN yes: 9.x (file)" or "cuDNN no - why": the CNN rows run or SKIP with the reason.
        cudnn = first(devices, r"^cuDNN")
        self.add(f"  {cudnn or 'cuDNN: not reported (a build without CUDA)'}")
        if cudnn.startswith("cuDNN yes") or self.dry:  # the dry run trains the CNNs on the CPU
            self.no_cudnn = ""
        elif cudnn.startswith("cuDNN no - "):
            self.no_cudnn = f"no cuDNN: {cudnn[len('cuDNN no - '):]}"
        else:
            self.no_cudnn = "no cuDNN: this build has no CUDA"
        if not self.dry and not first(devices, r"^usable GPUs: [1-9]"):
            usable = "\n".join(line for line in devices if "usable GPUs" in line) or (devices[-1] if devices else "")
            self.stop(f"gpu-check: no usable GPU: {usable}", 77)
        # The devices and precisions of the steps: the dry run's are the CPU's.
        self.dev, self.nccl, self.bf16, self.tf32 = ("cpu", "mpi", "fp32", "fp32") if self.dry else \
            ("cuda", "nccl", "bf16", "tf32")
        self.data = os.path.join(self.scratch, "fmnist")

    # ---- the gpu tests ----
    def gpu_tests(self):
        wrappers = os.path.join(self.scratch, "bin")
        if not executable(os.path.join(wrappers, "gpu_tests")):
            self.skip("gpu_ops", "this build has no gpu_tests (built without CUDA)")
            self.row("gpu_ddp_2ranks", "SKIP", "the same")
            return
        passed = r"All tests passed|test cases"
        cuda = {"MPIDDP_TEST_DEVICE": "cuda"}
        self.run_step("gpu_ops", 150, [self.mpirun, "-n", "1", os.path.join(wrappers, "gpu_tests")], cuda)
        self.verdict("gpu_ops", first(lines_of(self.log("gpu_ops")), passed))
        self.run_step("gpu_ddp_2ranks", 120, [self.mpirun, "-n", "2", os.path.join(wrappers, "mpi_tests"), "[ddp]"],
                      cuda)
        self.verdict("gpu_ddp_2ranks", first(lines_of(self.log("gpu_ddp_2ranks")), passed))

    # ---- benchmarks ----
    def bench_row(self, name, peak=None):
        """The row of a bench mlp step: samples/s, TFLOP/s and share of the matmul PEAK (default: the bf16 one
        measured; "" for none) of the first mode, and the exposed communication."""
        if self.rc != 0:
            return self.verdict(name, "")
        ok, detail = bench_detail(self.log(name), self.peak if peak is None else peak)
        if not ok:
            return self.row(name, "FAIL", f"exit 0 but {detail}")
        self.verdict(name, detail)

    def benchmarks(self):
        big = ["--inputs", "4096", "--hidden", "4096,4096,4096", "--outputs", "4096", "--batch", "4096",
               "--steps", "50"]
        small = ["--batch", "64", "--steps", "500"]
        big_cnn = BIG_CNN
        if self.dry:
            big = ["--inputs", "256", "--hidden", "256,256,256", "--outputs", "256", "--batch", "256", "--steps", "20"]
            small = ["--batch", "64", "--steps", "100"]
            big_cnn = ["--input-shape", "3,16,16", "--outputs", "10", "--batch", "16", "--steps", "3", "--warmup", "1",
                       "--layers", "conv2d(8,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear"]
        self.run_step("matmul_bf16", 60, [self.mpiddp, "bench", "matmul", "--precision", "bf16", "--size", "8192",
                                          "--seconds", "2"])
        peaks = re.findall(r"[0-9.]* TFLOP/s", "\n".join(lines_of(self.log("matmul_bf16"))))
        self.peak = peaks[0].split()[0] if peaks else ""
        if self.dry and self.rc == 2:
            self.row("matmul_bf16", "SKIP", f"dry run: {self.why('matmul_bf16')}")
        else:
            self.verdict("matmul_bf16", first(lines_of(self.log("matmul_bf16")), r"^matmul"))
        mlp = [self.mpirun, "-n", "1", self.mpiddp, "bench", "mlp", "--device", self.dev]
        self.run_step("big_mlp_nccl", 90, [*mlp, "--precision", self.bf16, *big, "--backend", self.nccl,
                                           "--comm", "both"])
        self.bench_row("big_mlp_nccl")
        self.run_step("big_mlp_staged", 90, [*mlp, "--precision", self.bf16, *big, "--backend", self.nccl,
                                             "--comm", "on", "--data", "staged"])
        self.bench_row("big_mlp_staged")
        self.run_step("small_mlp", 60, [*mlp, *small, "--comm", "both"])
        self.bench_row("small_mlp")
        if self.no_cudnn:
            return self.skip("big_cnn_tf32", self.no_cudnn)
        self.run_step("big_cnn_tf32", 90, [*mlp, "--precision", self.tf32, *big_cnn, "--comm", "none"])
        # No peak to compare with: the matmul peak is bf16's, these convolutions run in TF32.
        self.bench_row("big_cnn_tf32", "")

    # ---- Fashion-MNIST ----
    def train(self, name, ranks, backend, arguments, limit=120, env=None):
        """mpiddp train on the Fashion-MNIST shards, into scratch/NAME."""
        self.run_step(name, limit, [self.mpirun, "-n", str(ranks), self.mpiddp, "train", "inputs/fmnist_mlp.ini",
                                    "--data.train", f"{self.data}/train", "--data.test", f"{self.data}/test",
                                    "--run.dir", os.path.join(self.scratch, name), "--train.device", self.dev,
                                    "--dist.backend", backend, *arguments], env)

    def fmnist(self, name, ranks, backend, arguments=(), env=None):
        """A run, its accuracy against the floor, and the backend it used."""
        if not os.path.isdir(f"{self.data}/train"):
            return self.skip(name, NO_SHARDS)
        short = ["--train.epochs", "1"] if self.dry else []
        self.train(name, ranks, backend, [*short, *arguments], env=env)
        if self.rc != 0:
            return self.verdict(name, "")
        ok, detail = fmnist_detail(os.path.join(self.scratch, name, "summary.json"), 0.75 if self.dry else 0.87)
        if not ok:
            return self.row(name, "FAIL", detail or "no summary.json")
        if not any(f"gradients over {backend}" in line for line in lines_of(self.log(name))):
            return self.row(name, "FAIL", f"not over {backend}: {detail}")
        self.row(name, "PASS", detail + (" (dry run: CPU, fp32)" if self.dry else ""))

    def prepare_fmnist(self):
        """The Fashion-MNIST shards, once, for the first part that needs them."""
        if self.fmnist_prepared:
            return
        self.fmnist_prepared = True
        self.run_step("prepare_fmnist", 120, [f"{self.src}/scripts/prepare-fmnist.sh", self.data, self.mpiddp],
                      {"FMNIST_DIR": self.fmnist_src})
        self.verdict("prepare_fmnist", f"shards in {self.secs} s")

    def fashion_mnist(self):
        self.prepare_fmnist()
        self.fmnist("fmnist_w1_nccl_fp32", 1, self.nccl)
        self.fmnist("fmnist_w1_nccl_tf32", 1, self.nccl, ["--train.precision", self.tf32])
        self.fmnist("fmnist_w1_nccl_bf16", 1, self.nccl, ["--train.precision", self.bf16])
        self.fmnist("fmnist_w2_shared_mpi", 2, "mpi", ["--train.share_device", "true"],
                    {"CUDA_VISIBLE_DEVICES": self.one_gpu})

    # ---- ZeRO stage 1 where stage 0 does not fit ----
    def zero_row(self):
        """Two ranks share the GPU over MPI (NCCL needs a GPU per rank), bf16 products. A ballast tensor (PyTorch,
        in another process) leaves ZERO_FREE_GIB (default 48) free; the MLP is sized from the free memory then
        measured (zero_sizing: stage 0, 18 bytes per parameter per rank, cannot hold it even with no overhead, while
        stage 1, 14, can with ZERO_RANK_RESERVE_GIB, default 3, per rank for the CUDA context, the eagerly loaded
        modules and cuBLAS's workspace). PASS: stage 0 stops on out-of-memory and stage 1 trains, with a lower
        peak_device_bytes per rank than stage 0's state alone (16 P: the count leaves out the bf16 copies)."""
        name = "zero_w2_shared_bf16"
        keep = os.environ.get("ZERO_FREE_GIB") or str(ZERO_FREE_GIB)
        reserve = os.environ.get("ZERO_RANK_RESERVE_GIB") or str(ZERO_RESERVE_GIB)
        if self.dry:
            return self.skip(name, "dry run: needs a GPU (the sizing is from its free memory)")
        self.prepare_fmnist()
        if not os.path.isdir(f"{self.data}/train"):
            return self.skip(name, NO_SHARDS)
        self.secs = 0
        if self.left() < MIN_STEP_S:
            return self.skip(name, BUDGET_SPENT)
        ballast_log = self.log(f"{name}-ballast")
        if not torch_cuda_usable(ballast_log):
            return self.row(name, "SKIP", f"no PyTorch with CUDA for the ballast: {last_line(ballast_log)}")
        gpu, ready = self.one_gpu, os.path.join(self.scratch, "ballast.ready")
        with open(ballast_log, "a") as f:
            ballast = subprocess.Popen(["python3", "-c", BALLAST, keep, ready], stdout=f, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpu))
        self.background.append(ballast)

        def stop_ballast():
            ballast.terminate()
            ballast.wait()

        def wait_ready():
            """Up to 60 s, and no longer than the budget leaves."""
            for _ in range(120):
                if os.path.exists(ready) and os.path.getsize(ready) > 0:
                    return True
                if ballast.poll() is not None or self.left() < MIN_STEP_S:
                    return False
                time.sleep(0.5)
            return False
        if not wait_ready():
            stop_ballast()
            if self.left() < MIN_STEP_S:
                return self.row(name, "SKIP", f"{BUDGET_SPENT} (waiting for the ballast)")
            return self.row(name, "SKIP", f"the ballast did not start: {last_line(ballast_log)}")
        free_mib = output(["nvidia-smi", f"--id={gpu}", "--query-gpu=memory.free", "--format=csv,noheader,nounits"])
        free_mib = free_mib.split("\n")[0]
        sizing, why = zero_sizing(free_mib, reserve)
        if not sizing:
            stop_ballast()
            return self.row(name, "SKIP", f"cannot size the model (free '{free_mib}' MiB from nvidia-smi): {why}")
        params, hidden = sizing.params, sizing.hidden
        common = ["inputs/fmnist_mlp.ini", "--data.train", f"{self.data}/train", "--train.device", "cuda",
                  "--dist.backend", "mpi", "--train.share_device", "true", "--train.precision", "bf16",
                  "--optim.name", "adamw", "--train.max_steps", "2", "--train.eval", "false",
                  "--checkpoint.every_epochs", "0", "--model.hidden", f"{hidden},{hidden}"]
        train = [self.mpirun, "-n", "2", self.mpiddp, "train", *common]
        on_gpu = {"CUDA_VISIBLE_DEVICES": gpu}
        self.run_step(f"{name}-stage0", 120, [*train, "--run.dir", f"{self.scratch}/{name}-0", "--ddp.zero_stage", "0"],
                      on_gpu)
        rc0, secs0, budget0 = self.rc, self.secs, self.budget_reason()
        self.run_step(name, 180, [*train, "--run.dir", f"{self.scratch}/{name}-1", "--ddp.zero_stage", "1"], on_gpu)
        self.secs += secs0
        stop_ballast()
        sized = sizing.text()
        if budget0 or self.budget_reason():
            # Neither stage 0's out-of-memory nor stage 1's training can be judged from a run the budget stopped.
            return self.row(name, "SKIP", f"stage {0 if budget0 else 1}: {budget0 or self.budget_reason()}")
        if self.rc != 0:
            return self.row(name, "FAIL", f"stage 1 did not train ({sized}): {self.why(name)}")
        if not first(lines_of(self.log(f"{name}-stage0")), "out of memory", re.I):
            return self.row(name, "FAIL", f"stage 0 did not stop on out-of-memory (exit {rc0}, {sized}): "
                                          f"{self.why(f'{name}-stage0')}")
        ok, detail = zero_detail(os.path.join(self.scratch, f"{name}-1", "summary.json"), params)
        if not ok:
            return self.row(name, "FAIL", f"{detail or 'no summary.json'} ({sized})")
        self.row(name, "PASS", f"{detail}; {sized}")

    # ---- a small CNN for a few hundred steps ----
    def cnn(self, name, precision):
        """Its logged training loss must fall well below chance (ln 10 = 2.30) and end below where it started."""
        if self.no_cudnn:
            return self.skip(name, self.no_cudnn)
        self.prepare_fmnist()
        if not os.path.isdir(f"{self.data}/train"):
            return self.skip(name, NO_SHARDS)
        steps = 40 if self.dry else 300
        self.train(name, 1, self.nccl, ["--train.precision", precision, "--train.max_steps", str(steps),
                                        "--train.log_every", str(steps // 10), "--optim.warmup_steps",
                                        str(steps // 10), "--model.layers", SMALL_CNN])
        if self.rc != 0:
            return self.verdict(name, "")
        ok, detail = cnn_detail(os.path.join(self.scratch, name))
        if not ok:
            return self.row(name, "FAIL", f"the loss did not fall: {detail or 'no metrics'}")
        self.row(name, "PASS", detail + (" (dry run: CPU, fp32)" if self.dry else ""))

    # ---- the training tests (they skip without a GPU) ----
    # ---- transformers: GPT-2 124M on synthetic tokens, a byte GPT on the King James Bible ----
    def gpt2_rows(self):
        self.gpt2_row()
        self.torch_gpt2_row()

    def gpt2_geometry(self):
        """(blocks, width, heads, context, vocabulary, batch, steps) of the GPT-2 rows (the dry run: a small GPT)."""
        return (2, 64, 2, 64, 1000, 2, 6) if self.dry else (12, 768, 12, 1024, 50257, 8, 30)

    def gpt2_row(self):
        """GPT-2 124M (12 blocks, D 768, 12 heads, T 1024, vocabulary 50257, tied head), bf16, one GPU, on
        synthetic llm.c tokens: tokens/s and MFU (the dry run: 2 small blocks on the CPU). Steps 11-15 are traced
        (not in the steady window of the last 10 steps: tracing records events and writes its file at its end);
        the trace and the GPU's time per layer kind (trace-shares --device) go into the logs."""
        name = "gpt2_124m_bf16"
        blocks, width, heads, context, vocab, batch, steps = self.gpt2_geometry()
        shards = os.path.join(self.scratch, "gpt2_tokens")
        os.makedirs(os.path.join(self.scratch, "gpt2_bin"), exist_ok=True)
        write_llmc_shard(os.path.join(self.scratch, "gpt2_bin", "synthetic_000.bin"),
                         (batch * steps + 2) * (context + 1), vocab, 7)
        self.run_step(f"{name}-shard", 60, [self.mpiddp, "shard", "--format", "llmc", "--vocab", str(vocab), "--input",
                                            os.path.join(self.scratch, "gpt2_bin", "*.bin"), "--out", shards])
        if self.rc != 0:
            return self.verdict(name, "")
        run_dir = os.path.join(self.scratch, name)
        self.run_step(name, 180, [self.mpirun, "-n", "1", self.mpiddp, "train", "inputs/kjv_gpt.ini",
                                  "--data.train", shards, "--data.test", "", "--data.context", str(context),
                                  "--model.layers", gpt_layers(blocks, width, heads).replace("V", str(vocab)),
                                  "--train.batch_size", str(batch), "--train.max_steps", str(steps),
                                  "--train.log_every", str(steps // 3), "--train.eval", "false",
                                  "--train.trace_steps", "5", "--train.trace_after", str(max(1, steps - 20)),
                                  "--train.device", self.dev, "--train.precision", self.bf16, "--run.dir", run_dir])
        if self.rc != 0:
            return self.verdict(name, "")
        self.gpt2_steady = last_logged_rate(self.log(name), "tokens/s")
        self.save_gpt2_trace(name, run_dir)
        ok, detail = gpt_detail(os.path.join(run_dir, "summary.json"), blocks, context, width, self.peak)
        steady = f", steady {self.gpt2_steady:.0f} tokens/s (last {steps // 3} steps)" if self.gpt2_steady else ""
        self.row(name, "PASS" if ok else "FAIL", (detail + steady) if detail else "no summary.json")

    def save_gpt2_trace(self, name, run_dir):
        """The run's trace files into the logs, and the GPU's (else the host's) time per layer kind into its log."""
        for path in glob.glob(os.path.join(run_dir, "trace", "*.json")):
            shutil.copy(path, os.path.join(self.logs, f"{name}-{os.path.basename(path)}"))
        with open(self.log(name), "a") as f:
            for flag in ([[]] if self.dry else [["--device"], []]):
                f.write(f"trace-shares {' '.join(flag) or '(host)'}: ")
                f.flush()
                subprocess.call([sys.executable, os.path.join(self.src, "scripts", "trace-shares"), run_dir, *flag],
                                stdout=f, stderr=subprocess.STDOUT)

    def torch_gpt2_row(self):
        """The GPT-2 row's model, batch and steps in PyTorch (scripts/bench_torch_gpt.py) on the same GPU, and
        mpiddp's steady rate over PyTorch's (both after their first steps)."""
        name = "gpt2_124m_torch"
        if self.dry:
            return self.skip(name, "dry run: needs a GPU (PyTorch on the CPU is bench.sh's comparison)")
        if not torch_cuda_usable(self.log(name)):
            return self.skip(name, f"no PyTorch with CUDA: {last_line(self.log(name)) or 'python3 said nothing'}")
        blocks, width, heads, context, vocab, batch, steps = self.gpt2_geometry()
        self.run_step(name, 120, ["python3", os.path.join(self.src, "scripts", "bench_torch_gpt.py"),
                                  "--blocks", str(blocks), "--width", str(width), "--heads", str(heads),
                                  "--context", str(context), "--vocab", str(vocab), "--batch", str(batch),
                                  "--steps", str(steps), "--warmup", str(steps - steps // 3)],
                      {"CUDA_VISIBLE_DEVICES": self.one_gpu})
        if self.rc != 0:
            return self.verdict(name, "")
        rate = last_logged_rate(self.log(name), "tokens/s", r"torch gpt tokens/s ([\d.]+)")
        if not rate:
            return self.row(name, "FAIL", "no rate in its output")
        ratio = f"; mpiddp's steady rate is {self.gpt2_steady / rate:.2f}x" if self.gpt2_steady else ""
        self.row(name, "PASS", f"{rate:.0f} tokens/s (PyTorch {steps // 3} steps after {steps - steps // 3}, "
                               f"flash attention, autocast bf16, eager){ratio}")

    def kjv_row(self):
        """inputs/kjv_gpt.ini on one GPU in bf16, one epoch (the dry run: 30 steps on the CPU): tokens/s, test loss.
        The text is the bundle's data/kjv.txt (scripts/gpu-bundle.sh takes it from Debian's bible-kjv)."""
        name = "gpt_kjv_bf16"
        text = os.path.join(self.fmnist_src, "kjv.txt")
        if not os.path.isfile(text):
            return self.skip(name, f"no {text} (bundle made where Debian's bible-kjv is installed)")
        data = os.path.join(self.scratch, "kjv")
        os.makedirs(data, exist_ok=True)
        with open(text, "rb") as f:
            raw = f.read()
        cut = len(raw) * 9 // 10
        for part, piece in (("train", raw[:cut]), ("test", raw[cut:])):
            with open(os.path.join(data, f"{part}.txt"), "wb") as f:
                f.write(piece)
            self.run_step(f"{name}-{part}", 60, [self.mpiddp, "shard", "--format", "bytes", "--input",
                                                 os.path.join(data, f"{part}.txt"), "--out", os.path.join(data, part)])
            if self.rc != 0:
                return self.verdict(name, "")
        run_dir = os.path.join(self.scratch, name)
        # The dry run: 30 steps on the CPU, no evaluation (a pass over the test text takes the CPU half a minute).
        length = ["--train.max_steps", "30", "--train.eval", "false"] if self.dry else ["--train.epochs", "1"]
        self.run_step(name, 240, [self.mpirun, "-n", "1", self.mpiddp, "train", "inputs/kjv_gpt.ini",
                                  "--data.train", os.path.join(data, "train"), "--data.test", os.path.join(data, "test"),
                                  *length, "--train.device", self.dev, "--train.precision", self.bf16,
                                  "--run.dir", run_dir])
        if self.rc != 0:
            return self.verdict(name, "")
        ok, detail = gpt_detail(os.path.join(run_dir, "summary.json"), 4, 128, 192, self.peak)
        self.row(name, "PASS" if ok else "FAIL", detail or "no summary.json")

    def gpu_training(self):
        self.run_step("gpu_training", 240, ["bash", "tests/integration/gpu_test_training.sh"],
                      {"MPIDDP": self.mpiddp, "MPIEXEC": self.mpirun, "MPIDDP_SOURCE_DIR": self.src,
                       "FMNIST_DIR": self.fmnist_src})
        passed = sum(1 for line in lines_of(self.log("gpu_training")) if line.startswith("ok:"))
        self.verdict("gpu_training", f"{passed} checks passed")

    # ---- compute-sanitizer on a short training (the kernels have -lineinfo) ----
    def sanitizers(self):
        sanitizer = shutil.which("compute-sanitizer") or next(
            (path for path in sorted(found for pattern in ("/usr/local/cuda*/bin/compute-sanitizer",
                                                           "/usr/local/cuda*/compute-sanitizer/compute-sanitizer",
                                                           "/opt/nvidia/*/compute-sanitizer")
                                     for found in glob.glob(pattern)) if os.path.isfile(path)), "")
        for tool in ("memcheck", "racecheck"):
            name = f"sanitizer_{tool}"
            if not sanitizer:
                self.skip(name, "compute-sanitizer not found")
                continue
            if self.dry:
                self.skip(name, f"dry run: needs a GPU ({sanitizer} found)")
                continue
            self.prepare_fmnist()
            if not os.path.isdir(f"{self.data}/train"):
                self.skip(name, NO_SHARDS)
                continue
            # Lazy loading here: only the kernels the run uses are instrumented (eager would patch all of cuBLAS's).
            # The MPI backend: NCCL's spinning kernels are not what this checks.
            self.run_step(name, 120, [self.mpirun, "-n", "1", "env", "CUDA_MODULE_LOADING=LAZY", sanitizer,
                                      "--tool", tool, "--target-processes", "all", "--error-exitcode", "86",
                                      "--print-limit", "20", self.mpiddp, "train", "inputs/fmnist_mlp.ini",
                                      "--data.train", f"{self.data}/train", "--data.test", f"{self.data}/test",
                                      "--run.dir", os.path.join(self.scratch, name), "--train.device", "cuda",
                                      "--dist.backend", "mpi", "--train.max_steps", "6"])
            self.sanitizer_row(name)

    # ---- the table, last ----
    def finish(self):
        self.add(f"total: {self.seconds()} s")
        own_out = os.environ.get("OUT") or "/nonexistent"
        if os.path.isdir(own_out) and os.path.abspath(own_out) == self.out:
            if subprocess.call(["tar", "-czf", f"{self.out}/logs.tar.gz", "-C", self.out, "logs"]) == 0:
                shutil.rmtree(self.logs, ignore_errors=True)
                self.add(f"logs: {self.out}/logs.tar.gz")
        else:
            self.add(f"logs: {self.logs}")
        print()
        with open(self.table) as f:
            print(f.read(), end="", flush=True)
        return self.failed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__, end="")
        return 0
    # SIGTERM ends the check as an error would: the scratch folder and the ballast go too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.chdir(src)
    out = (argv[0] if argv else "") or os.environ.get("OUT") or "/tmp/gpu-check"
    try:
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    except OSError:
        print(f"gpu-check: error: cannot create {out}", file=sys.stderr)
        return 2
    out = os.path.abspath(out)
    scratch = tempfile.mkdtemp(prefix="gpu-check.", dir="/tmp")
    background = []
    try:
        return GpuCheck(src, out, scratch, background).run()
    finally:
        for process in background:
            if process.poll() is None:
                process.terminate()
                process.wait()
        shutil.rmtree(scratch, ignore_errors=True)
