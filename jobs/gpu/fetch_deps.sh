#!/usr/bin/env bash
# For a machine without these libraries (a GPU node that has PyTorch and CUDA but no package
# registry): downloads Debian 12's Open MPI, HDF5, spdlog/fmt, CLI11, nlohmann-json and GoogleTest
# .deb files on a machine that has apt, and unpacks them with `dpkg -x` into one folder that can be
# copied to the GPU machine beside the sources. jobs/build.sh --gpu finds them there.
# usage: jobs/gpu/fetch_deps.sh [dir=.gpu_deps]      (run on a Debian 12 machine with network)
# The folder holds usr/ (headers, libraries, mpiexec) and env.sh, which sets PATH,
# LD_LIBRARY_PATH, CMAKE_PREFIX_PATH and OPAL_PREFIX (Open MPI found relative to the folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath -m "${1:-.gpu_deps}")
packages=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libhwloc-dev libevent-core-2.1-7
  libevent-pthreads-2.1-7 libevent-dev libpmix2 libfabric1 libucx0 libnuma1 libibverbs1 librdmacm1
  libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libmunge2
  libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-fortran-102 libhdf5-hl-100 libhdf5-hl-cpp-100
  libhdf5-hl-fortran-100 libsz2 libaec0 libcurl3-gnutls libcurl4 libssh2-1 libldap-2.5-0 libsasl2-2
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev
  libgmock-dev
)
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download -qq "${packages[@]}")
rm -rf "$dir"
mkdir -p "$dir"
for f in "$debs"/*.deb; do dpkg -x "$f" "$dir"; done
# Documentation, manuals and Fortran modules are not needed to build or run.
rm -rf "$dir"/usr/share/doc "$dir"/usr/share/man "$dir"/usr/share/lintian
# Static archives (ddgnn links the shared libraries; GoogleTest ships only archives), Fortran,
# Java and OpenSHMEM parts are not needed either: the folder stays small enough to copy.
find "$dir" \( -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' \) -delete
find "$dir" \( -name '*fortran*' -o -name '*mpifh*' -o -name '*usempi*' -o -name '*oshmem*' \
  -o -name '*.mod' -o -name '*java*' \) -prune -exec rm -rf {} +
# Debian's absolute symbolic links (e.g. the alternatives of mpicc and libmpi) point into /etc or /usr
# of the build machine; make them relative to the folder.
while IFS= read -r link; do
  target=$(readlink "$link")
  case "$target" in
    /etc/alternatives/*) ;;
    /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link" ;;
  esac
done < <(find "$dir" -type l)
arch=x86_64-linux-gnu
ompi="$dir/usr/lib/$arch/openmpi"
# The alternatives Debian would have registered: mpiexec, mpicc and libmpi.so.
ln -sfn ../lib/$arch/openmpi/bin/mpiexec.openmpi "$dir/usr/bin/mpiexec" 2>/dev/null || true
[ -e "$dir/usr/bin/mpiexec.openmpi" ] && ln -sfn mpiexec.openmpi "$dir/usr/bin/mpiexec"
[ -e "$dir/usr/bin/orterun" ] && ln -sfn orterun "$dir/usr/bin/mpiexec.openmpi"
[ -e "$dir/usr/bin/opal_wrapper" ] && ln -sfn opal_wrapper "$dir/usr/bin/mpicc"
ln -sfn "openmpi/lib/libmpi.so" "$dir/usr/lib/$arch/libmpi.so"
ln -sfn "../../openmpi/include" "$dir/usr/lib/$arch/openmpi/include/.." 2>/dev/null || true
cat > "$dir/env.sh" <<ENV
# Source this file to use the unpacked libraries: . .gpu_deps/env.sh
d=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
export PATH="\$d/usr/bin:\$PATH"
export LD_LIBRARY_PATH="\$d/usr/lib/$arch:\$d/usr/lib/$arch/openmpi/lib:\$d/usr/lib/$arch/hdf5/serial:\${LD_LIBRARY_PATH:-}"
export CMAKE_PREFIX_PATH="\$d/usr:\${CMAKE_PREFIX_PATH:-}"
export OPAL_PREFIX="\$d/usr"
export OPAL_LIBDIR="\$d/usr/lib/$arch/openmpi/lib"
# PMIx loads its plugins from the folder, not from a PMIx the machine may have in /usr/lib.
export PMIX_MCA_mca_base_component_path="\$d/usr/lib/$arch/pmix2/lib/pmix"
export PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_plm_rsh_agent=false OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
echo "fetch_deps: $(du -sh "$dir" | cut -f1) in $dir; use: . $dir/env.sh"
