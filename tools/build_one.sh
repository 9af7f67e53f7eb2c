#!/usr/bin/env bash
# Build a one-chapter book with warnings as errors from an executed notebook:
#   bash tools/build_one.sh /tmp/influential_sets_ci.ipynb      -> /tmp/book-influential_sets/_build/html
#   bash tools/build_one.sh /tmp/influential_sets/book.ipynb    -> the same (a notebook named ci or book: its folder's name)
set -euo pipefail
nb="$1"
slug="$(basename "$nb" .ipynb)"
case "$slug" in ci|book) slug="$(basename "$(dirname "$nb")")" ;; esac
slug="${slug%_ci}"; slug="${slug%_book}"  # only a trailing scale: weightlens_circuitlens keeps its "_ci"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
cp "$nb" "$tmp/$slug.ipynb"
if ! grep -q "file: nbs/$slug" "$root/_toc.yml"; then
  # not yet in the toc: build with a temporary toc that lists it
  echo "note: $slug is not in _toc.yml yet; using a temporary toc"
  export ICLR26_EXTRA_CHAPTER="$slug"
fi
cd "$root" && "$root/.venv/bin/python" -m tools.build_ci_book --executed "$tmp" --only "$slug" --out "/tmp/book-$slug"
