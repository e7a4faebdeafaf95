#!/usr/bin/env bash
# Installs the Debian 12 packages that ddgnn builds, tests and generates its data with.
# Idempotent and quick when everything is there already. Runs as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake git pkg-config python3 python3-matplotlib clang-format zlib1g-dev
  shellcheck python3-sympy
  clang libclang-rt-dev
  libtorch-dev libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  libhdf5-dev libcli11-dev libspdlog-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  lammps lammps-data libxtb-dev python3-rdkit python3-ase
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
