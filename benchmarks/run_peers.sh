#!/usr/bin/env bash
# The peer FedAvg workload, interleaved: bare PyTorch loop, edgesim sequential, edgesim vmap,
# (the peers' vmap loop), Flower -- REPS repetitions, each variant once per repetition, the
# order rotated from one repetition to the next so host drift spreads over all of them.
# The peers' scripts run from their own folder (never copied); Flower runs in its own venv.
#
#   bash benchmarks/run_peers.sh                  # REPS=3, ~6-8 min per repetition on a quiet 2-core host
#   REPS=2 FLOWER="2" bash benchmarks/run_peers.sh
#   TUNED=1 bash benchmarks/run_peers.sh          # every variant under the peers' GLIBC_TUNABLES (tag _malloc)
#   THREADS=1 MALLOPT=1 ONLY="plain edgesim_seq" bash benchmarks/run_peers.sh   # 1 thread; + edgesim --mallopt
#
# Environment:
#   PY          python with edgesim installed (default: <repo>/.venv/bin/python); runs the bare
#               loop, the vmap loop, calib.py and the summaries too (same torch 2.13.0+cpu)
#   PEER_PY     python of the Flower venv (default: <repo>/.peer-venv/bin/python)
#   PEERS_DIR   the peers' folder (default: <repo>/../shared/bench/peers)
#   PEER_RESULTS_DIR  where results go (default: <repo>/runs/peer-bench; runs/ is git-ignored)
#   REPS, REP_START   repetitions (tags _r<REP_START>.._r<REP_START+REPS-1>)
#   FLOWER      Flower concurrencies to run, e.g. "2 1" (default) or "" to skip Flower
#   THREADS     torch threads of the bare loop and edgesim runs, e.g. "2 1" (default "2"); a 1-thread
#               run is compared with the 1-thread bare loop and suffers far less from a busy host
#   PEER_VMAP=0 skip the peers' bare vmap loop (always 2 threads);  CALIB=0 skip calib.py before each run
#   MALLOPT=1   also edgesim sequential and vmap with --mallopt (glibc keeps freed memory in-process)
#   ONLY        space-separated subset of: plain edgesim_seq edgesim_vmap peer_vmap flower
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PEERS=${PEERS_DIR:-$REPO/../shared/bench/peers}
PEERS="$(cd "$PEERS" && pwd)"
export PEERS_DIR=$PEERS
PY=${PY:-$REPO/.venv/bin/python}
PEER_PY=${PEER_PY:-$REPO/.peer-venv/bin/python}
REPS=${REPS:-3}
REP_START=${REP_START:-1}
FLOWER=${FLOWER-"2 1"}
SUF=""
if [[ "${TUNED:-0}" == "1" ]]; then
  export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184
  SUF="_malloc"
fi
export FLWR_TELEMETRY_ENABLED=0 RAY_USAGE_STATS_ENABLED=0
RES=${PEER_RESULTS_DIR:-$REPO/runs/peer-bench}
mkdir -p "$RES/logs"; RES="$(cd "$RES" && pwd)"; export PEER_RESULTS_DIR=$RES

# name|python|script and arguments  (name = the JSON base name the script writes, without the tag)
SPECS=()
want() { [[ -z "${ONLY:-}" ]] || [[ " $ONLY " == *" $1 "* ]]; }
for t in ${THREADS:-2}; do
  want plain        && SPECS+=("plain_loop_t$t|$PY|$PEERS/plain_loop.py --threads $t")
  want edgesim_seq  && SPECS+=("edgesim_sequential_t$t|$PY|$HERE/peer_fedavg.py --executor sequential --threads $t")
  want edgesim_vmap && SPECS+=("edgesim_vmap_t$t|$PY|$HERE/peer_fedavg.py --executor vmap --threads $t")
  if [[ "${MALLOPT:-0}" == "1" ]]; then   # the proposed fix: edgesim keeps freed memory (mallopt), the rest as is
    want edgesim_seq  && SPECS+=("edgesim_sequential_t${t}_mallopt|$PY|$HERE/peer_fedavg.py --executor sequential --threads $t --mallopt")
    want edgesim_vmap && SPECS+=("edgesim_vmap_t${t}_mallopt|$PY|$HERE/peer_fedavg.py --executor vmap --threads $t --mallopt")
  fi
done
[[ "${PEER_VMAP:-1}" == "1" ]] && want peer_vmap && SPECS+=("vmap_loop_t2|$PY|$PEERS/vmap_loop.py --no-check")
if want flower; then
  for c in $FLOWER; do
    [[ -x "$PEER_PY" ]] || { echo "no Flower venv at $PEER_PY (see benchmarks/README.md) -- set FLOWER=\"\" to skip" >&2; exit 2; }
    SPECS+=("flower_c${c}_t$((2 / c))|$PEER_PY|$PEERS/flower_fedavg.py --concurrency $c")
  done
fi
n=${#SPECS[@]}
{ echo "# $(date -u +%FT%TZ) nproc=$(nproc) model=$(lscpu | sed -n 's/^Model name: *//p') REPS=$REPS TUNED=${TUNED:-0}"; } >> "$RES/load.log"
for r in $(seq "$REP_START" $(( REP_START + REPS - 1 ))); do
  for i in $(seq 0 $(( n - 1 ))); do
    spec=${SPECS[$(( (i + r - 1) % n ))]}   # rotate the order every repetition
    name=${spec%%|*}; rest=${spec#*|}; py=${rest%%|*}; cmd=${rest#*|}
    tag="${SUF}_r${r}"
    log="$RES/logs/${name}${tag}.log"
    echo "== $name (rep $r$SUF) -> $log"
    [[ "${CALIB:-1}" == "1" ]] && "$PY" "$PEERS/calib.py" --tag "${name}${tag}"
    echo "$(date +%s) start ${name}${tag} $(cat /proc/loadavg)" >> "$RES/load.log"
    # shellcheck disable=SC2086
    /usr/bin/time -v "$py" $cmd --tag "$tag" > "$log" 2>&1 || echo "!! $name failed (see $log)"
    echo "$(date +%s) end ${name}${tag} $(cat /proc/loadavg)" >> "$RES/load.log"
    grep -E "^RESULT" "$log" || true
  done
done
"$PY" "$PEERS/summarize.py" > /dev/null && echo "peers' summary: $RES/summary.md"
"$PY" "$HERE/peer_fedavg.py" --summarize "$RES" | tee "$RES/edgesim_summary.md"
