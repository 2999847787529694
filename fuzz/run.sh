#!/usr/bin/env bash
# Builds every fuzz target once and runs each for SECONDS (default 60) with libFuzzer.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Stable toolchain, no cargo-fuzz: the coverage instrumentation cargo-fuzz would ask for is set
# here (RUSTFLAGS below), and `--target` keeps it off build scripts and proc macros (which
# would not link against libFuzzer). One release build of the one crate `fuzz/` with all its
# bins, in $CARGO_TARGET_DIR (default `target/fuzz`).
#
# Each target's corpus lives under the target directory (`fuzz-corpus/<target>`, not
# committed), seeded from `fuzz/seeds/<target>`; it grows from run to run. A crash stops that
# target, leaves its input as `fuzz-crashes/<target>/crash-…` (the path is printed), and
# makes the script fail after the other targets ran. Prints execs/s per target.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-60}"
shift || true
case "$seconds" in
  '' | *[!0-9]*) echo "usage: fuzz/run.sh [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/../target/fuzz}"
host="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"

# Every `[[bin]]` of Cargo.toml is a target.
mapfile -t all < <(sed -n 's/^name = "\([a-z0-9_]*\)"$/\1/p' Cargo.toml | grep -v '^dsh-fuzz$')
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

echo "== building ${#all[@]} fuzz targets (release, instrumented, $host)"
t0=$(date +%s)
cargo build --release --locked --target "$host" --bins
echo "built in $(($(date +%s) - t0)) s"
bin_dir="$CARGO_TARGET_DIR/$host/release"

failed=()
summary=()
for t in "${targets[@]}"; do
  corpus="$CARGO_TARGET_DIR/fuzz-corpus/$t"
  crashes="$CARGO_TARGET_DIR/fuzz-crashes/$t"
  mkdir -p "$corpus" "$crashes"
  log="$CARGO_TARGET_DIR/fuzz-logs/$t.log"
  mkdir -p "$(dirname "$log")"
  echo "== $t: ${seconds} s"
  status=0
  # -rss_limit_mb: a target that needs more than 2 GiB for one input is a finding too.
  "$bin_dir/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=25 \
    -artifact_prefix="$crashes/" -print_final_stats=1 \
    "$corpus" "seeds/$t" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  took=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  if [ "$status" -ne 0 ]; then
    tail -40 "$log" >&2
    crash=$(ls -t "$crashes" 2>/dev/null | head -1)
    echo "FAILED: $t (exit $status); input: $crashes/$crash; log: $log" >&2
    failed+=("$t")
    summary+=("$(printf '%-22s %10s execs/s %12s execs  corpus %5s  CRASHED' "$t" "${took:-?}" "${runs:-?}" "$units")")
  else
    summary+=("$(printf '%-22s %10s execs/s %12s execs  corpus %5s' "$t" "${took:-?}" "${runs:-?}" "$units")")
  fi
done

echo "== summary (${seconds} s each)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "crashed: ${failed[*]}" >&2
  exit 1
fi
echo "${#targets[@]} passed, 0 failed"
