# tests/data/tests.cmake: ctest tests (label `data`) of the dataset generators in jobs/data/: small
# generation runs, finite-difference label checks, byte-identical reruns and bad inputs. Included
# from tests/CMakeLists.txt; LAMMPS tests need `lmp`, xtb tests the ddgnn-xtb-md target, the
# molecules set also RDKit (Debian's python3-rdkit).
set(DDGNN_DATA_DIR ${CMAKE_SOURCE_DIR}/jobs/data)
set(DDGNN_DATA_OUT ${CMAKE_CURRENT_BINARY_DIR}/data_tests)
set(DDGNN_DATA_FRAMES 60)

find_program(DDGNN_BASH bash)
find_program(DDGNN_PYTHON3 python3)
find_program(LMP lmp)

function(ddgnn_data_test name)
  cmake_parse_arguments(T "" "SETUP;REQUIRES" "COMMAND" ${ARGN})
  add_test(NAME data.${name} COMMAND ${T_COMMAND})
  set_tests_properties(data.${name} PROPERTIES LABELS data TIMEOUT 180)
  if(T_SETUP)
    set_tests_properties(data.${name} PROPERTIES FIXTURES_SETUP ${T_SETUP})
  endif()
  if(T_REQUIRES)
    set_tests_properties(data.${name} PROPERTIES FIXTURES_REQUIRED ${T_REQUIRES})
  endif()
endfunction()

if(NOT DDGNN_BASH OR NOT DDGNN_PYTHON3)
  message(WARNING "bash or python3 not found: the `data` tests (jobs/data) are not registered")
  return()
endif()

# A missing tool is a failure, not a silently smaller suite: a warning at configure time and a
# test `name` (label `label`) that fails.
function(ddgnn_missing name label text)
  message(WARNING "${text}")
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E false)
  set_tests_properties(${name} PROPERTIES LABELS ${label})
endfunction()

# `ddgnn convert` then `ddgnn info` on a generated set, with the figures it must show.
function(ddgnn_convert_test name atoms species neighbours)
  ddgnn_data_test(convert.${name} REQUIRES data_${name}
                  COMMAND ${DDGNN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/convert_check.py
                          $<TARGET_FILE:ddgnn> ${DDGNN_DATA_OUT}/a/${name}.extxyz
                          ${DDGNN_DATA_OUT}/a/${name}.h5 --graphs ${DDGNN_DATA_FRAMES}
                          --atoms ${atoms} --species ${species} --neighbours ${neighbours})
endfunction()

set(gen ${DDGNN_DATA_DIR}/generate.sh)
set(helpers ${DDGNN_DATA_DIR}/test_helpers.sh)
set(run_a ${DDGNN_DATA_OUT}/a)
set(run_b ${DDGNN_DATA_OUT}/b)

# Bad inputs of the scripts: non-zero exit and a message that says what is wrong.
ddgnn_data_test(bad.unknown_dataset COMMAND ${DDGNN_BASH} ${helpers} fail
                "unknown dataset 'nope'.*known datasets: cu_eam" ${gen} --only nope
                --out ${DDGNN_DATA_OUT}/bad)
ddgnn_data_test(bad.frames COMMAND ${DDGNN_BASH} ${helpers} fail
                "--frames expects a positive integer, got 'ten'" ${gen} --frames ten
                --out ${DDGNN_DATA_OUT}/bad)
ddgnn_data_test(bad.xtb_driver COMMAND ${DDGNN_BASH} ${helpers} fail
                "xtb driver '.*/no-such-binary' not found" ${gen} --only ethanol
                --xtb-md ${DDGNN_DATA_OUT}/no-such-binary --out ${DDGNN_DATA_OUT}/bad)
ddgnn_data_test(bad.fd_check_file COMMAND ${DDGNN_BASH} ${helpers} fail
                "cannot|No such file" ${DDGNN_PYTHON3} ${DDGNN_DATA_DIR}/fd_check_lammps.py
                ${DDGNN_DATA_OUT}/no-such-file.extxyz)

# ---- LAMMPS datasets ----
if(LMP)
  # The *_strain sets deform the cell while they run: their labels come from LAMMPS's rerun, and
  # the finite-difference check is what says they belong to the stored cell and positions.
  foreach(name cu_eam cuni_eam si_sw cu_eam_strain si_sw_strain)
    ddgnn_data_test(gen.${name} SETUP data_${name}
                    COMMAND ${DDGNN_BASH} ${gen} --out ${run_a} --frames ${DDGNN_DATA_FRAMES}
                            --only ${name} --lmp ${LMP})
    ddgnn_data_test(fd.${name} REQUIRES data_${name}
                    COMMAND ${DDGNN_PYTHON3} ${DDGNN_DATA_DIR}/fd_check_lammps.py
                            ${run_a}/${name}.extxyz --lmp ${LMP})
  endforeach()
  foreach(name cu_eam cuni_eam)
    ddgnn_data_test(rerun.${name} REQUIRES data_${name}
                    COMMAND ${DDGNN_BASH} ${helpers} rerun ${run_a} ${run_b} ${name}
                            --frames ${DDGNN_DATA_FRAMES} --lmp ${LMP})
  endforeach()
  # Convert with ddgnn and check what `ddgnn info` reports. Bulk fcc at 5 A: 42 neighbours
  # (12+6+24) at 0 K; at 800-900 K the 4th shell (5.0-5.1 A) starts to enter; diamond Si at 5 A: 28 at 0 K.
  ddgnn_convert_test(cu_eam 108 Cu 40,50)
  ddgnn_convert_test(cuni_eam 108 Cu,Ni 40,50)
  ddgnn_convert_test(si_sw 64 Si 25,31)
  # The check must catch wrong labels: forces off by 1e-4 eV/A.
  ddgnn_data_test(fd_catches_bad_forces.cu_eam REQUIRES data_cu_eam
                  COMMAND ${DDGNN_BASH} ${helpers} fd-rejects ${run_a}/cu_eam.extxyz
                          ${DDGNN_DATA_OUT}/cu_eam.bad.extxyz 1e-4 "FAIL: forces"
                          ${DDGNN_PYTHON3} ${DDGNN_DATA_DIR}/fd_check_lammps.py {} --lmp ${LMP})
  ddgnn_data_test(bad.fd_check_xtb_set REQUIRES data_cu_eam
                  COMMAND ${DDGNN_BASH} ${helpers} fail "not a LAMMPS dataset"
                          ${DDGNN_PYTHON3} ${DDGNN_DATA_DIR}/fd_check_lammps.py
                          ${run_a}/cu_eam.extxyz --dataset ethanol --lmp ${LMP})
else()
  ddgnn_missing(data.lammps_missing data
                "lmp (LAMMPS) not found: the `data` tests of cu_eam, cuni_eam and si_sw are NOT \
registered. Install it (Debian: apt-get install lammps) as the README says.")
endif()

# ---- xtb datasets ----
if(TARGET ddgnn-xtb-md)
  set(xtb_md $<TARGET_FILE:ddgnn-xtb-md>)
  foreach(name ethanol aspirin)
    ddgnn_data_test(gen.${name} SETUP data_${name}
                    COMMAND ${DDGNN_BASH} ${gen} --out ${run_a} --frames ${DDGNN_DATA_FRAMES}
                            --only ${name} --xtb-md ${xtb_md})
    ddgnn_data_test(fd.${name} REQUIRES data_${name}
                    COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
                            ${xtb_md} --fd-check ${run_a}/${name}.extxyz)
  endforeach()
  # Molecules: every atom of ethanol (9) or aspirin (21) lies within 5 A of most others.
  ddgnn_convert_test(ethanol 9 C,H,O 5,8)
  ddgnn_convert_test(aspirin 21 C,H,O 9,18)
  ddgnn_data_test(rerun.ethanol REQUIRES data_ethanol
                  COMMAND ${DDGNN_BASH} ${helpers} rerun ${run_a} ${run_b} ethanol
                          --frames ${DDGNN_DATA_FRAMES} --xtb-md ${xtb_md})
  ddgnn_data_test(fd_catches_bad_forces.ethanol REQUIRES data_ethanol
                  COMMAND ${DDGNN_BASH} ${helpers} fd-rejects ${run_a}/ethanol.extxyz
                          ${DDGNN_DATA_OUT}/ethanol.bad.extxyz 1e-4 "FAIL: stored forces"
                          ${xtb_md} --fd-check {})
  ddgnn_data_test(bad.xtb_geometry COMMAND ${DDGNN_BASH} ${helpers} fail
                  "cannot open geometry file '.*/missing.xyz'" ${xtb_md}
                  --in ${DDGNN_DATA_OUT}/missing.xyz --out ${DDGNN_DATA_OUT}/never.extxyz)
  ddgnn_data_test(bad.xtb_option COMMAND ${DDGNN_BASH} ${helpers} fail
                  "--frames expects an integer >= 1, got '0'" ${xtb_md} --frames 0)
else()
  ddgnn_missing(data.xtb_missing data
                "ddgnn-xtb-md is not built (libxtb-dev / pkg-config `xtb` not found): the `data` \
tests of ethanol and aspirin are NOT registered. Install it (Debian: apt-get install libxtb-dev \
xtb) as the README says.")
endif()

# ---- the molecules set (RDKit + xtb) ----
# The first python3 that imports `module` (Debian's python3-* packages live under
# /usr/bin/python3, which need not be the python3 first on PATH), or "", in `out`.
function(ddgnn_python_with module out)
  foreach(py /usr/bin/python3 ${DDGNN_PYTHON3})
    if(EXISTS ${py})
      execute_process(COMMAND ${py} -c "import ${module}" RESULT_VARIABLE rc OUTPUT_QUIET
                      ERROR_QUIET)
      if(rc EQUAL 0)
        set(${out} ${py} PARENT_SCOPE)
        return()
      endif()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# gen_molecules.py needs RDKit.
ddgnn_python_with(rdkit DDGNN_RDKIT_PYTHON)
if(DDGNN_RDKIT_PYTHON)
  set(gen_mol ${DDGNN_RDKIT_PYTHON} ${DDGNN_DATA_DIR}/gen_molecules.py)
  # The shipped list: >= 200 distinct, parsable, neutral closed-shell molecules of H C N O F S Cl.
  ddgnn_data_test(molecules.smiles_file COMMAND ${gen_mol} --check --min-molecules 200)
  # A SMILES RDKit cannot parse: the error names file, line and SMILES; nothing is written.
  file(WRITE ${DDGNN_DATA_OUT}/bad_molecules.smi
       "# a valid molecule, then an unclosed ring\nCCO ethanol\nC1CC broken_ring\n")
  ddgnn_data_test(bad.molecules_smiles
                  COMMAND ${DDGNN_BASH} ${helpers} fail-leaves-nothing
                          ${DDGNN_DATA_OUT}/bad_molecules.extxyz
                          "bad_molecules.smi:3: RDKit cannot parse the SMILES 'C1CC'"
                          ${gen_mol} --smiles ${DDGNN_DATA_OUT}/bad_molecules.smi
                          --out ${DDGNN_DATA_OUT}/bad_molecules.extxyz)
  # xtb failing on every molecule: each named, and no output file or scratch folder left.
  find_program(DDGNN_FALSE false)
  if(DDGNN_FALSE)
    ddgnn_data_test(bad.molecules_xtb_fails
                    COMMAND ${DDGNN_BASH} ${helpers} fail-leaves-nothing
                            ${DDGNN_DATA_OUT}/failed_molecules.extxyz
                            "2 of 2 molecules failed, no output written"
                            ${gen_mol} --molecules 2 --xtb-md ${DDGNN_FALSE}
                            --out ${DDGNN_DATA_OUT}/failed_molecules.extxyz)
  endif()
endif()
if(TARGET ddgnn-xtb-md AND DDGNN_RDKIT_PYTHON)
  # 6 molecules x 3 frames of the shipped list (the first six: alkanes of 8 to 17 atoms).
  set(mol_args --only molecules --molecules 6 --per-molecule 3 --xtb-md ${xtb_md})
  ddgnn_data_test(gen.molecules SETUP data_molecules
                  COMMAND ${DDGNN_BASH} ${gen} --out ${run_a} ${mol_args})
  ddgnn_data_test(check.molecules REQUIRES data_molecules
                  COMMAND ${DDGNN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/molecules_check.py
                          ${run_a}/molecules.extxyz --smiles ${DDGNN_DATA_DIR}/molecules.smi
                          --molecules 6 --per-molecule 3)
  ddgnn_data_test(fd.molecules REQUIRES data_molecules
                  COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
                          ${xtb_md} --fd-check ${run_a}/molecules.extxyz)
  ddgnn_data_test(rerun.molecules REQUIRES data_molecules
                  COMMAND ${DDGNN_BASH} ${helpers} rerun ${run_a} ${run_b} molecules
                          ${mol_args})
  # Each molecule a config_type of its own (what Dataset.split_by group keeps together).
  ddgnn_data_test(convert.molecules REQUIRES data_molecules
                  COMMAND ${DDGNN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/convert_check.py
                          $<TARGET_FILE:ddgnn> ${run_a}/molecules.extxyz
                          ${run_a}/molecules.h5 --graphs 18 --atoms 8,17 --species C,H
                          --neighbours 6,16 --config-types 6)
elseif(TARGET ddgnn-xtb-md)
  ddgnn_missing(data.rdkit_missing data
                "no python3 that imports RDKit (Debian: apt-get install python3-rdkit): the \
`data` tests of the molecules set are NOT registered.")
endif()

# ---- molecular dynamics through `ddgnn driver` (i-PI) with ASE as the server ----
# Models trained on the ethanol (xtb) and Cu (LAMMPS) sets answer ASE's SocketIOCalculator as
# `ddgnn evaluate` does; NVE through jobs/md.py; each fault of the driver. Needs Debian's
# python3-ase.
ddgnn_python_with(ase.calculators.socketio DDGNN_ASE_PYTHON)
if(NOT DDGNN_WITH_TORCH)
  # `ddgnn driver` is part of the torch build only.
elseif(DDGNN_ASE_PYTHON AND LMP AND TARGET ddgnn-xtb-md)
  add_test(NAME md.driver
           COMMAND ${DDGNN_ASE_PYTHON} ${CMAKE_SOURCE_DIR}/tests/md/test_driver.py
                   ${run_a}/ethanol.extxyz ${run_a}/cu_eam.extxyz)
  set_tests_properties(md.driver PROPERTIES LABELS md TIMEOUT 900
                       FIXTURES_REQUIRED "data_ethanol;data_cu_eam"
                       ENVIRONMENT "DDGNN=$<TARGET_FILE:ddgnn>")
else()
  ddgnn_missing(md.ase_missing md
                "no python3 that imports ASE (Debian: apt-get install python3-ase), or no lmp or \
xtb: the `md` tests of `ddgnn driver` are NOT registered.")
endif()
