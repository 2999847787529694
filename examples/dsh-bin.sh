# Sourced by the demos: sets `dsh` (an array) to the binary to run — $DSH_BIN, else the `dsh`
# on PATH, else target/release/dsh, else the release binary built once now.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${DSH_BIN:-}" ]; then
  dsh=("$DSH_BIN")
elif command -v dsh >/dev/null 2>&1; then
  dsh=("$(command -v dsh)")
elif [ -x "$root/target/release/dsh" ]; then
  dsh=("$root/target/release/dsh")
else
  echo "# building dsh once (cargo build --release; a few minutes the first time)" >&2
  cargo build --release --locked --quiet --manifest-path "$root/Cargo.toml" -p dsh-cli --bin dsh
  dsh=("$root/target/release/dsh")
fi
