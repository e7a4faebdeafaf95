# The folder contract of DESIGN.md: model/ includes no MPI header, tuner/ includes no torch,
# comm/ and loader/ include no torch.
function(forbid folder regex why)
  file(GLOB_RECURSE files ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.cpp
       ${SOURCE_DIR}/${folder}/*.cu)
  foreach(f IN LISTS files)
    file(STRINGS ${f} hits REGEX "${regex}")
    if(hits)
      message(FATAL_ERROR "${f}: ${why}: ${hits}")
    endif()
  endforeach()
endfunction()
forbid(model "#include [<\"](mpi\\.h|comm/)" "model/ must not include MPI or comm/")
forbid(tuner "#include [<\"](torch/|ATen/|c10/|mpi\\.h)" "tuner/ must not include torch or MPI")
forbid(comm "#include [<\"](torch/|ATen/|c10/)" "comm/ must not include torch")
forbid(loader "#include [<\"](torch/|ATen/|c10/)" "loader/ must not include torch")
message(STATUS "layout: folder contract holds")
