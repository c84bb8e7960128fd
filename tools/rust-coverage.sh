#!/usr/bin/env sh
# Line coverage of the Rust core by its own tests (`make coverage-rust`): source-based coverage
# (-C instrument-coverage) read with llvm-profdata and llvm-cov from rustup's llvm-tools-preview
# component (no cargo-llvm-cov or tarpaulin needed). Writes coverage/rust/summary.txt.
set -eu
cd "$(dirname "$0")/.."
PATH="$PATH:$HOME/.cargo/bin"
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
[ -x "$bin/llvm-cov" ] || { echo "rust-coverage: needs 'rustup component add llvm-tools-preview'" >&2; exit 1; }
out="$PWD/coverage/rust"
rm -rf "$out"
mkdir -p "$out/profraw"
export RUSTFLAGS="-C instrument-coverage" CARGO_TARGET_DIR="$PWD/target/coverage"
export LLVM_PROFILE_FILE="$out/profraw/%p-%m.profraw"
cargo test -j 2 -p nce-core --lib --tests
"$bin/llvm-profdata" merge -sparse "$out"/profraw/*.profraw -o "$out/nce-core.profdata"
objects=$(cargo test -j 2 -p nce-core --lib --tests --no-run --message-format=json |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
"$bin/llvm-cov" report $(for o in $objects; do printf -- '--object %s ' "$o"; done) \
  --instr-profile "$out/nce-core.profdata" --ignore-filename-regex='/\.cargo/|/rustc/|/tests/' |
  tee "$out/summary.txt"
