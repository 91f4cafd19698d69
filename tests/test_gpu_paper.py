"""benchmarks/gpu_paper.sh, the GPU window's script, in its dry run on the CPU: every job of the window runs
(2 rounds, a few devices), the summary and the packed run folders land in OUT, and a used OUT is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_paper  # noqa: E402 - a script of benchmarks/, imported by path


def _script(out: Path, data: Path, total_s: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out), "DATA": str(data), "PY": sys.executable, "TOTAL_S": str(total_s)}
    return subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_paper.sh"), "--dry-run"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_dry_run_runs_every_job_and_packs_the_run_folders(tmp_path, shared_data):
    out = tmp_path / "out"
    done = _script(out, shared_data)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    jobs = gpu_paper.dry_jobs()
    assert {x["job"] for x in summary["lines"]} == {j.name for j in jobs}
    assert {j.part for j in jobs} == {"a", "b", "c", "d", "moon", "e"}
    for line in summary["lines"]:
        assert line["status"] == "finished", line
        assert line["rounds"] == line["rounds_planned"] == 2, line
        assert line["host_s_per_round"] is not None and line["host_s_per_round"] >= 0
        assert 0.0 <= line["accuracy_last"] <= 1.0
    assert "| a_subset_s0 | dofed_spp | finished | 2/2 |" in (out / "summary.md").read_text()
    with tarfile.open(out / "runs.tgz") as tar:
        names = tar.getnames()
    for j in jobs:
        assert f"runs/{j.name}/rounds.csv" in names and f"runs/{j.name}.log" in names
    assert "torch" in (out / "gpu.txt").read_text()


def test_dry_run_jobs_mirror_the_windows_jobs():
    paper, dry = gpu_paper.paper_jobs(), gpu_paper.dry_jobs()
    assert [j.name for j in dry] == [j.name for j in paper if j.seed == 0]
    assert [j.name for j in paper if j.part == "a"] == [f"a_{s}_s{seed}" for s in ("subset", "normal") for seed in range(3)]
    assert all(j.must_finish for j in paper if j.part == "a") and not any(j.must_finish for j in paper if j.part != "a")
    by_name = {j.name: j for j in paper}
    assert by_name["moon_1000"].limit_s == 120.0
    assert all(j.rounds == 2 and j.n_procs == 1 for j in dry)
    cmd = gpu_paper.command(by_name["b_feddure_iid_iid"], Path("o"), Path("d"))
    assert cmd[cmd.index("--jobs") + 1] == "4" and "train.precision='bfloat16'" in cmd
    cmd = gpu_paper.command(by_name["c_um_pfssl_a0.5"], Path("o"), Path("d"))
    assert cmd[cmd.index("--jobs") + 1] == "1" and 'run.algorithms=["um_pfssl","fixavg"]' in cmd


def test_a_used_out_is_refused_and_left_alone(tmp_path, shared_data):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("a user's file")
    done = _script(out, shared_data)
    assert done.returncode == 2
    assert f"OUT={out}: is not empty" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_per_round_host_time_is_the_mean_gap_after_the_first_row():
    assert gpu_paper.per_round_s([10.0, 12.0, 13.0, 16.0]) == 2.0  # (16 - 10) / 3
    assert str(gpu_paper.per_round_s([4.0])) == "nan"


def test_a_job_starts_only_when_its_processes_and_its_gpu_memory_fit():
    job = gpu_paper.Job("j", "b", "s.toml", ("fedavg", "fixavg"), 10, gpu_gib=60.0)
    assert gpu_paper.fits(job, free_procs=2, free_gib=60.0, busy=True)
    assert not gpu_paper.fits(job, free_procs=1, free_gib=100.0, busy=True)  # one slot short
    assert not gpu_paper.fits(job, free_procs=8, free_gib=59.0, busy=True)  # memory short
    assert gpu_paper.fits(job, free_procs=8, free_gib=30.0, busy=False)  # larger than the budget: alone
    assert gpu_paper.fits(job, free_procs=8, free_gib=float("inf"), busy=True)  # no GPU: no memory budget


def test_dump_stacks_asks_a_process_for_its_stacks_and_leaves_it_running():
    code = ("import faulthandler, signal, sys, time; faulthandler.register(signal.SIGUSR1, all_threads=True); "
            "print('ready', flush=True); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        gpu_paper.dump_stacks(proc.pid)
        time.sleep(0.5)
        assert proc.poll() is None  # still running
    finally:
        proc.kill()
    assert "most recent call first" in proc.communicate()[1]


def test_fixavg_at_feddures_layout_runs_first_and_alone_under_a_round_timeout():
    paper, dry = gpu_paper.paper_jobs(), {j.name: j for j in gpu_paper.dry_jobs()}
    b0 = paper[0]
    assert b0.name == "b0_fixavg_feddure" and b0.alone and b0.algorithms == ("fixavg",)
    assert b0.scenario == "feddure_fmnist_iid_iid.toml" and b0.limit_s and b0.round_timeout_s < b0.limit_s
    cmd = gpu_paper.command(b0, Path("o"), Path("d"))
    assert cmd[cmd.index("--round-timeout-s") + 1] == "60"
    assert not gpu_paper.fits(b0, free_procs=100, free_gib=1e9, busy=True)  # never beside another job
    assert gpu_paper.fits(b0, free_procs=0, free_gib=0.0, busy=False)
    assert dry["b0_fixavg_feddure"].alone and dry["b0_fixavg_feddure"].round_timeout_s == 60.0
    assert b0.enough_rounds == 4  # stopped once its host time per round is known


def test_the_moonshot_samples_its_evaluation_and_trains_on_client_workers():
    by_name, dry = {j.name: j for j in gpu_paper.paper_jobs()}, {j.name: j for j in gpu_paper.dry_jobs()}
    assert {"run.eval_devices=0.1", "run.label_quality=false"} <= set(by_name["moon_1000"].sets)
    workers = by_name["moon_workers"]
    cmd = gpu_paper.command(workers, Path("o"), Path("d"))
    assert cmd[cmd.index("--client-workers") + 1] == "8" and "train.executor='sequential'" in cmd
    assert workers.n_slots == 9 and dry["moon_workers"].workers == 2  # the run's process and its workers
    for name in ("b_feddure_iid_iid", "c_um_pfssl_a0.5", "e_arena_clients"):
        assert "run.eval_every=5" in by_name[name].sets, name
    for name in ("c_um_pfssl_a0.5", "e_arena_clients"):  # the last window's out-of-memory failures
        assert "train.vmap_max_clients=5" in by_name[name].sets, name


def test_a_round_timeout_becomes_the_jobs_status(tmp_path):
    line = ("--round-timeout-s 60: fixavg's round 0 has run 60.2 s; it is in its evaluation phase (for 40.1 s); "
            "stopping the run")
    log = tmp_path / "j.log"
    log.write_text(f"python -m edgesim.scenarios.cli run ...\nerror: {line}\nerror: interrupted: ...\n")
    assert gpu_paper.round_timeout_line(log) == line
    log.write_text("python -m edgesim.scenarios.cli run ...\nTraceback ...\n")
    assert gpu_paper.round_timeout_line(log) is None
    assert gpu_paper.round_timeout_line(tmp_path / "absent.log") is None
