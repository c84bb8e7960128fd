# Sourced by configure (Unix) and configure.win (Windows), as the extendr templates share theirs:
# find cargo and rustc, check rustc against the minimum Rust version, and set up the offline build
# of a source tarball. The caller sets RSCRIPT (R's Rscript), EXE ("" or ".exe") and CARGO_DIRS
# (where rustup puts cargo besides PATH); afterwards CARGO_BIN, RUSTC_BIN, CARGO_FLAGS and
# CARGO_HOME_LINE hold what the caller substitutes into its Makevars.
#
# Offline build: a source tarball made by `make tarball` carries src/rust/vendor.tar.xz (all crates of
# the workspace's Cargo.lock), src/rust/Cargo.lock and src/rust/workspace.toml. Outside the
# repository (no Cargo.toml at the package root) they are unpacked here, and cargo runs with
# --offline --locked and CARGO_HOME inside the build directory, whose config.toml points crates.io at
# the vendored sources: no network, nothing written to ~/.cargo. In a clone of the repository cargo
# builds in the root workspace with the registry instead.

msrv=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' src/rust/nce-r/Cargo.toml)

need_rust() {
  cat >&2 <<MSG
-------------------------------------------------------------------------------
ERROR: nce needs the Rust toolchain to build from source: cargo and rustc >= $msrv.
$1
Install Rust, then install nce again:
  * any system:    https://rustup.rs  (installs cargo and rustc into ~/.cargo/bin)
  * Windows:       rustup-init.exe from https://rustup.rs, then in a terminal
                   rustup target add x86_64-pc-windows-gnu   (Rtools links the GNU target)
  * Debian/Ubuntu: sudo apt install cargo rustc   (check: rustc --version >= $msrv)
  * Fedora:        sudo dnf install cargo rustc
  * macOS:         brew install rust
-------------------------------------------------------------------------------
MSG
  exit 1
}

# The tool on PATH, else in the first of CARGO_DIRS that has it.
find_tool() {
  p=$(command -v "$1$EXE" 2>/dev/null)
  if [ -z "$p" ]; then
    for dir in $CARGO_DIRS; do
      if [ -x "$dir/$1$EXE" ]; then p="$dir/$1$EXE"; break; fi
    done
  fi
  echo "$p"
}

CARGO_BIN=$(find_tool cargo)
RUSTC_BIN=$(find_tool rustc)
[ -n "$CARGO_BIN" ] || need_rust "cargo was not found on PATH nor in: $CARGO_DIRS"
[ -n "$RUSTC_BIN" ] || need_rust "rustc was not found on PATH nor in: $CARGO_DIRS"

rustc_version=$("$RUSTC_BIN" --version 2>/dev/null)
ver=$(echo "$rustc_version" | sed -n 's/^rustc \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
[ -n "$ver" ] || need_rust "'$RUSTC_BIN --version' did not run (with rustup: rustup default stable)."
cargo_version=$("$CARGO_BIN" --version 2>/dev/null) || need_rust "'$CARGO_BIN --version' did not run."

major() { echo "${1%%.*}"; }
minor() { r=${1#*.}; echo "${r%%.*}"; }
if [ "$(major "$ver")" -lt "$(major "$msrv")" ] ||
   { [ "$(major "$ver")" -eq "$(major "$msrv")" ] && [ "$(minor "$ver")" -lt "$(minor "$msrv")" ]; }; then
  need_rust "Found $rustc_version ($RUSTC_BIN), older than $msrv (with rustup: rustup update stable)."
fi
echo "configure: using $rustc_version ($RUSTC_BIN)"
echo "configure: using $cargo_version ($CARGO_BIN)"

# The package directory as cargo (a native program, also on Windows) reads paths: MSYS's pwd -W
# gives C:/... where plain pwd gives /c/...
pkg_dir=$(pwd -W 2>/dev/null || pwd)

CARGO_FLAGS=""
CARGO_HOME_LINE=""
if [ -f src/rust/vendor.tar.xz ] && [ ! -f Cargo.toml ]; then
  echo "configure: offline build from the vendored crates in src/rust/vendor.tar.xz"
  [ -f src/rust/Cargo.lock ] && [ -f src/rust/workspace.toml ] ||
    { echo "configure: src/rust/Cargo.lock or src/rust/workspace.toml is missing (make the tarball with 'make tarball')" >&2; exit 1; }
  rm -rf src/rust/vendor src/rust/.cargo
  (cd src/rust && "$RSCRIPT" --vanilla -e 'utils::untar("vendor.tar.xz", tar = "internal")') ||
    { echo "configure: could not unpack src/rust/vendor.tar.xz" >&2; exit 1; }
  cp src/rust/workspace.toml src/rust/Cargo.toml
  mkdir -p src/rust/.cargo
  cat > src/rust/.cargo/config.toml <<TOML
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "$pkg_dir/src/rust/vendor"

[net]
offline = true
TOML
  CARGO_FLAGS="--offline --locked"
  CARGO_HOME_LINE="export CARGO_HOME='$pkg_dir/src/rust/.cargo';"
elif [ -f Cargo.toml ]; then
  echo "configure: building in the repository's Cargo workspace (crates from the registry)"
else
  echo "configure: no src/rust/vendor.tar.xz: cargo fetches the crates from the registry"
  # A tarball made by plain `R CMD build` has neither the vendored crates nor the lock file.
  [ -f src/rust/Cargo.lock ] && [ -f src/rust/workspace.toml ] && cp src/rust/workspace.toml src/rust/Cargo.toml
fi
