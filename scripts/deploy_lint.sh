#!/usr/bin/env bash
# `make deploy-lint`: the deployment files checked offline (docs/deployment.md, «Checked in CI»).
#   Dockerfile           hadolint
#   deploy/**/*.yaml     yamllint (deploy/.yamllint)
#   deploy/compose/      the compose specification's JSON schema, vendored in deploy/schemas/
#   deploy/kubernetes/   kubernetes-validate --strict (its schemas ship inside the package)
#   deploy/systemd/      systemd-analyze verify, with /opt/achilles read as this checkout
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
status=0
step() { echo "== $*"; }
fail() { echo "deploy-lint: $*" >&2; status=1; }

step "hadolint Dockerfile"
"$BIN/hadolint" Dockerfile || fail "hadolint found problems in the Dockerfile"

step "yamllint deploy/"
"$BIN/yamllint" --strict -c deploy/.yamllint deploy/ || fail "yamllint found problems"

step "compose files against the compose specification (deploy/schemas/compose-spec.json)"
"$BIN/check-jsonschema" --schemafile deploy/schemas/compose-spec.json deploy/compose/*.yaml \
  || fail "a compose file does not follow the compose specification"

step "kubernetes manifests (kubernetes-validate --strict)"
"$BIN/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml || fail "a kubernetes manifest is invalid"

step "systemd units (systemd-analyze verify)"
if command -v systemd-analyze >/dev/null 2>&1; then
  units="$(mktemp -d)"
  # The units name /opt/achilles (the documented install); here that is this checkout, so the
  # executables they start are checked to exist too.
  for unit in deploy/systemd/*; do
    sed "s#/opt/achilles#$PWD#g" "$unit" > "$units/$(basename "$unit")"
  done
  # verify exits 0 on some parse errors it "ignores": any output at all is a failure
  out="$(cd "$units" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no ./*.service ./*.target 2>&1)"
  verify=$?
  rm -rf "$units"
  if [ $verify -ne 0 ] || [ -n "$out" ]; then
    echo "$out"
    fail "systemd-analyze verify found problems in deploy/systemd/"
  fi
else
  echo "systemd-analyze is not installed: the units are not verified"
fi
[ $status -eq 0 ] && echo "deploy-lint: all deployment files pass"
exit $status
