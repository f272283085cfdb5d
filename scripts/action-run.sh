#!/usr/bin/env bash
# The step of action.yml: install libdoctor with pipx (unless INPUT_INSTALL=false), run
# `libdoctor check` (or `plan lock FILE` with INPUT_PLAN_LOCK) with the action's inputs (INPUT_* from the step's env), write the SARIF log
# when INPUT_FORMAT=sarif, and leave with libdoctor's exit code (0 healthy, 1 findings, 2 error).
# Outputs exit-code and sarif-file go to $GITHUB_OUTPUT.
set -uo pipefail

format="${INPUT_FORMAT:-text}"
sarif_file="${INPUT_SARIF_FILE:-libdoctor.sarif}"
output="${GITHUB_OUTPUT:-/dev/null}"

case "$format" in
  text|sarif) ;;
  *) echo "::error::libdoctor: format must be text or sarif, not '$format'" >&2; exit 2 ;;
esac

if [ "${INPUT_INSTALL:-true}" = "true" ]; then
  if [ -n "${INPUT_VERSION:-}" ]; then
    spec="libdoctor==${INPUT_VERSION}"
  else
    spec="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}"
  fi
  pipx install --force "$spec" >&2 || { echo "::error::pipx install $spec failed" >&2; exit 2; }
  bin_dir="$(pipx environment --value PIPX_BIN_DIR 2>/dev/null || true)"
  if [ -n "$bin_dir" ]; then
    PATH="$bin_dir:$PATH"
  fi
fi

command -v libdoctor >/dev/null || { echo "::error::libdoctor is not on PATH" >&2; exit 2; }

if [ -n "${INPUT_PLAN_LOCK:-}" ]; then
  argv=(plan lock "$INPUT_PLAN_LOCK")
  what="plan lock"
else
  argv=(check)
  what="check"
  if [ -n "${INPUT_TARGET:-}" ]; then
    argv+=("$INPUT_TARGET")
  fi
  if [ -n "${INPUT_PYTHON:-}" ]; then
    argv+=(--python "$INPUT_PYTHON")
  fi
fi
read -r -a extra <<< "${INPUT_ARGS:-}"
argv+=("${extra[@]}")

if [ "$format" = "sarif" ]; then
  mkdir -p "$(dirname "$sarif_file")"
  libdoctor "${argv[@]}" --format sarif > "$sarif_file"
  rc=$?
  echo "libdoctor: SARIF written to $sarif_file (exit $rc)" >&2
  echo "sarif-file=$sarif_file" >> "$output"
else
  libdoctor "${argv[@]}"
  rc=$?
fi
echo "exit-code=$rc" >> "$output"
if [ "$rc" -ne 0 ]; then
  echo "::error::libdoctor $what exited $rc" >&2
fi
exit "$rc"
