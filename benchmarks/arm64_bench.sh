#!/usr/bin/env bash
# Per-sample figures of the edge on arm64 under qemu-user next to x86-64 native, in one run.
#
#   sudo bash benchmarks/arm64_bench.sh [--suite bookworm] [--seconds 3] [--repeat 1]
#                                       [--no-insn] [--out FILE]
#
# Reuses tests/arm64.sh's arm64 root (cached in ~/.cache/vsense-arm64/): installs this tree
# into a fresh copy of the test root, builds the bundles on the x86 host (offline extra),
# starts one Mosquitto on the host and runs benchmarks/arm64_bench.py:
#   1. `time` natively on x86 and in the arm64 root (qemu-aarch64-static through binfmt,
#      QEMU_CPU=cortex-a53 and a Raspberry Pi 3 /proc/cpuinfo, so numba compiles for the
#      Pi 3's Cortex-A53): kernel us/step, wake-up floor, the daemon's CPU per sample by stage
#      at 1 kHz (signal and adc level, default configuration);
#   2. `insn` (unless --no-insn) under qemu with the instruction-counting plugin
#      benchmarks/arm64_bench_insn.c, built here with gcc against Debian's qemu-user (the
#      static qemu cannot load plugins): arm64 with qemu-aarch64 -cpu cortex-a53 inside the
#      root, x86-64 with qemu-x86_64 -cpu Haswell (numba compiles for haswell, AVX2);
#   3. `report`: the tables (time ratio arm64-emulated / x86; instructions per sample).
# What the figures mean: the time ratio measures qemu's emulation overhead on this machine,
# not a Raspberry Pi; the instruction counts are user-space instructions of the whole process
# per sample (the kernel's side of system calls is not counted), the basis for a Pi 3
# estimate (instructions / (clock x IPC)). About 5 min with warm caches (--repeat 1, load 6).
set -euo pipefail
BENCH_REPO="$(cd "$(dirname "$0")/.." && pwd)"
SUITE_ARG=bookworm; SECONDS_ARG=3; REPEAT=1; INSN=1; OUT_MD=""
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) SUITE_ARG="$2"; shift ;;
    --seconds) SECONDS_ARG="$2"; shift ;;
    --repeat) REPEAT="$2"; shift ;;
    --no-insn) INSN=0 ;;
    --out) OUT_MD="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "arm64_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=../tests/arm64.sh
source "$BENCH_REPO/tests/arm64.sh"
SUITE="$SUITE_ARG"
export ARM64_QEMU_CPU=cortex-a53
B="$WORK/bench"          # host side: bundles, JSON, marks, report
GB=/work/bench           # the same directory inside the arm64 root
PLUGIN="$WORK/libvsense_insn.so"
QHOST=/opt/qemu-host     # the dynamic qemu-aarch64 and its libraries, inside the root

write_cpuinfo_a53() {  # /proc/cpuinfo of a Raspberry Pi 3 (4 x Cortex-A53), for numba's LLVM
  local f="$WORK/cpuinfo-cortex-a53" i
  : > "$f"
  for i in 0 1 2 3; do
    printf 'processor\t: %d\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd evtstrm crc32 cpuid\n' \
      "$i" >> "$f"
    printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n' >> "$f"
    printf 'CPU part\t: 0xd03\nCPU revision\t: 4\n\n' >> "$f"
  done
  printf 'Revision\t: a02082\nModel\t\t: Raspberry Pi 3 Model B Rev 1.2\n' >> "$f"
  echo "$f"
}

bench_host_setup() {
  host_setup
  local need=""
  [ -x /usr/bin/qemu-aarch64 ] && [ -x /usr/bin/qemu-x86_64 ] || need="$need qemu-user"
  command -v gcc >/dev/null || need="$need gcc"
  if [ "$INSN" -eq 1 ] && [ -n "$need" ]; then
    log "installing$need (Debian packages; the dynamic qemu loads plugins)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
  fi
  if [ "$INSN" -eq 1 ]; then
    gcc -shared -fPIC -O2 -Wall -o "$PLUGIN" "$BENCH_REPO/benchmarks/arm64_bench_insn.c"
    log "plugin $PLUGIN; $(/usr/bin/qemu-aarch64 --version | head -1)"
  fi
}

bench_root() {  # the test root with this tree, a Pi 3 cpuinfo and the host's dynamic qemu
  prepare_test_root
  mount --bind "$(write_cpuinfo_a53)" "$R/proc/cpuinfo"; MOUNTS+=("$R/proc/cpuinfo")
  if [ "$INSN" -eq 1 ]; then
    local lib
    mkdir -p "$R$QHOST/lib"
    cp /usr/bin/qemu-aarch64 "$PLUGIN" "$R$QHOST/"
    for lib in $(ldd /usr/bin/qemu-aarch64 | awk '/=> \// {print $3}'); do
      cp -L "$lib" "$R$QHOST/lib/"
    done
    cp -L /lib64/ld-linux-x86-64.so.2 "$R$QHOST/"
  fi
}

bench_inputs() {
  rm -rf "$B"; mkdir -p "$B"
  "$HOST_VENV/bin/python" "$BENCH_REPO/benchmarks/arm64_bench.py" prepare "$B"
  rm -rf "$R$GB"; mkdir -p "$R$GB"; cp "$B"/*.npz "$R$GB/"
}

BENCH_PORT=""
bench_broker() {
  BENCH_PORT=$("$HOST_VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\n' \
    "$BENCH_PORT" > "$B/mosquitto.conf"
  /usr/sbin/mosquitto -c "$B/mosquitto.conf" > "$B/mosquitto.log" 2>&1 & BROKER_PID=$!
  log "mosquitto on the host, port $BENCH_PORT (pid $BROKER_PID)"
}

ARGS=()
bench_args() { ARGS=(--port "$BENCH_PORT" --seconds "$SECONDS_ARG"); }

x86_time() {
  (cd "$BENCH_REPO" && "$HOST_VENV/bin/python" benchmarks/arm64_bench.py time "$B" "${ARGS[@]}" \
    --repeat "$REPEAT" --out "$B/x86_time.json") | tee "$B/x86_time.log"
}
arm_time() {
  inside "$R" "cd /src && /opt/vsense-test/bin/python benchmarks/arm64_bench.py time $GB \
    ${ARGS[*]} --repeat $REPEAT --out $GB/arm_time.json" | tee "$B/arm_time.log"
}
x86_insn() {
  # numba's cache is keyed by the CPU name and features: compile natively for exactly what
  # qemu-x86_64 -cpu Haswell shows (a native insn run, marks are no-ops there), so the counted
  # run under the plugin loads every cached kernel instead of compiling it under emulation
  local feats
  feats=$(cd "$BENCH_REPO" && QEMU_CPU=Haswell /usr/bin/qemu-x86_64 "$HOST_VENV/bin/python" -c \
    'import llvmlite.binding as ll; print(ll.get_host_cpu_features().flatten())' 2>/dev/null)
  (cd "$BENCH_REPO" && export NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="$feats" &&
    "$HOST_VENV/bin/python" benchmarks/arm64_bench.py insn "$B" "${ARGS[@]}" \
      --out "$B/x86_insn_native_haswell.json" > "$B/x86_insn_warm.log" 2>&1 &&
    QEMU_CPU=Haswell /usr/bin/qemu-x86_64 -plugin "$PLUGIN,out=$B/x86_marks.txt" \
      "$HOST_VENV/bin/python" benchmarks/arm64_bench.py insn "$B" "${ARGS[@]}" \
      --out "$B/x86_insn.json" 2>&1 | grep -v '^qemu-x86_64: warning') | tee "$B/x86_insn.log"
}
arm_insn() {  # the dynamic qemu-aarch64 (x86 code, runs natively in the chroot) + plugin
  inside "$R" "cd /src && $QHOST/ld-linux-x86-64.so.2 --library-path $QHOST/lib \
    $QHOST/qemu-aarch64 -cpu cortex-a53 -plugin $QHOST/libvsense_insn.so,out=$GB/arm_marks.txt \
    /opt/vsense-test/bin/python benchmarks/arm64_bench.py insn $GB ${ARGS[*]} \
    --out $GB/arm_insn.json" | tee "$B/arm_insn.log"
}

bench_report() {
  cp "$R$GB"/arm_*.json "$B/"
  [ "$INSN" -eq 1 ] && cp "$R$GB/arm_marks.txt" "$B/"
  if [ "$INSN" -eq 0 ]; then  # time only: the report needs the insn files; make empty ones
    for a in x86 arm; do echo '{"env": {}, "phases": {}}' > "$B/${a}_insn.json"
      : > "$B/${a}_marks.txt"; done
  fi
  "$HOST_VENV/bin/python" "$BENCH_REPO/benchmarks/arm64_bench.py" report \
    "$B/x86_time.json" "$B/x86_insn.json" "$B/x86_marks.txt" \
    "$B/arm_time.json" "$B/arm_insn.json" "$B/arm_marks.txt" --out "${OUT_MD:-$B/report.md}"
}

step "host setup (+ qemu-user, plugin)" bench_host_setup
step "base root file system ($SUITE)" build_base "$SUITE"
step "test root ($SUITE)" build_test_root "$SUITE"
step "install vsense into the root (+ Pi 3 cpuinfo, qemu)" bench_root
step "bundles on x86 (offline)" bench_inputs
bench_broker
bench_args
step "time, x86 native" x86_time
step "time, arm64 emulated (cortex-a53)" arm_time
if [ "$INSN" -eq 1 ]; then
  step "instructions, x86 (qemu-x86_64 + plugin)" x86_insn
  step "instructions, arm64 (qemu-aarch64 + plugin)" arm_insn
fi
kill "$BROKER_PID"; BROKER_PID=""
echo
step "report" bench_report
leave
echo
echo "==== arm64 bench summary (total $(( $(date +%s) - T_START )) s; load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '  %s\n' "${SUMMARY[@]}"
