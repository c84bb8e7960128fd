#!/usr/bin/env sh
# Prepare the Rust sources of the R source tarball (run by `make tarball` before `R CMD build`):
#   src/rust/vendor.tar.xz   every crate of the workspace's Cargo.lock (`cargo vendor --locked`),
#                            without their tests, benches, examples and docs;
#   src/rust/Cargo.lock      a copy of the workspace's Cargo.lock, the one lock file;
#   src/rust/workspace.toml  the workspace manifest with paths relative to src/rust, which
#                            configure installs as src/rust/Cargo.toml in an unpacked tarball.
# The three files are build products (.gitignore); configure builds offline when they are present.
set -eu
cd "$(dirname "$0")/.."
PATH="$PATH:$HOME/.cargo/bin"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cargo vendor --locked --versioned-dirs --quiet "$tmp/vendor" >/dev/null

# Parts of the crates that a library build never reads. Cargo checks each remaining file against
# .cargo-checksum.json, so the per-file list is emptied (the package checksum stays).
for crate in "$tmp"/vendor/*/; do
  for d in tests benches examples docs doc .github ci; do rm -rf "$crate$d"; done
  sed -i 's/"files":{[^}]*}/"files":{}/' "$crate.cargo-checksum.json"
done
# Crates that name pruned targets explicitly keep building: cargo ignores targets of dependencies.

Rscript tools/authors.R "$tmp/vendor" inst/AUTHORS

# Reproducible archive: sorted names, fixed owner and time.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2024-01-01 00:00Z' \
  -C "$tmp" -cf - vendor | xz -9 > src/rust/vendor.tar.xz
cp Cargo.lock src/rust/Cargo.lock
{ echo "# Workspace of the R source tarball: written by tools/vendor.sh from the root Cargo.toml."
  grep -v '^#' Cargo.toml | sed -e 's#"src/rust/#"#g' -e '/^exclude *=/d'; } > src/rust/workspace.toml
echo "vendor.sh: src/rust/vendor.tar.xz $(du -k src/rust/vendor.tar.xz | cut -f1) kB," \
  "$(ls "$tmp/vendor" | wc -l) crates"
