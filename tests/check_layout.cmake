#The folder contract of DESIGN.md("Folders") : which folder may include what.A violation names
#the file, the rule and the include.
#core / nothing of the other folders
#comm / core / and MPI : no torch, nothing of loader /, model /, tuner /, config /, train /
#loader / core / and comm / : no torch, nothing of model /, tuner /, config /, train /
#tuner / core / only : no torch, no MPI
#model / core / and LibTorch : no MPI, nothing of comm /, loader /, tuner /, config /, train / ;
#model / spec.h(what config / reads) includes no torch
#config / core /, tuner / and model / spec.h : no torch, no MPI
#train / anything but app /
#app / everything; nothing includes app / but app / itself
#Lines of the folder's sources that match `regex`, unless they also match `allowed` (optional).
function(forbid folder regex why)
  set(allowed "${ARGV3}")
  file(GLOB_RECURSE files ${SOURCE_DIR}/${
  folder}/*.h ${SOURCE_DIR}/${folder}/*.cpp
       ${SOURCE_DIR}/${folder}/*.cu)
  foreach(f IN LISTS files)
    file(STRINGS ${f} hits REGEX "${regex}")
    if(allowed)
      list(FILTER hits EXCLUDE REGEX "${allowed}")
    endif()
    if(hits)
      message(FATAL_ERROR "${f}: ${why}: ${hits}")
    endif()
  endforeach()
endfunction()

set(torch "#include [<\"](torch/|ATen/|c10/)")
set(mpi "#include [<\"](mpi\\.h|nccl\\.h)")
forbid(core "#include \"(comm|loader|tuner|model|config|train|app)/" "core/ includes no other folder")
forbid(comm "${torch}" "comm/ must not include torch")
forbid(comm "#include \"(loader|model|tuner|config|train|app)/" "comm/ moves bytes: no loader/, model/, tuner/, config/, train/")
forbid(loader "${torch}" "loader/ must not include torch")
forbid(loader "#include \"(model|tuner|config|train|app)/" "loader/ must not include model/, tuner/, config/, train/")
forbid(tuner "${torch}" "tuner/ must not include torch")
forbid(tuner "${mpi}" "tuner/ must not include MPI")
forbid(tuner "#include \"(comm|loader|model|config|train|app)/" "tuner/ includes core/ only")
forbid(model "${mpi}" "model/ must not include MPI")
forbid(model "#include \"(comm|loader|tuner|config|train|app)/" "model/ includes core/ only")
forbid(config "${torch}" "config/ must not include torch")
forbid(config "${mpi}" "config/ must not include MPI")
forbid(config "#include \"(comm|loader|train|app)/" "config/ must not include comm/, loader/, train/")
forbid(config "#include \"model/" "config/ includes model/spec.h only" "model/spec\\.h")
forbid(train "#include \"app/" "nothing includes app/")
forbid(tests "#include \"app/" "tests include app/commands.h only" "app/commands\\.h")
forbid(bench "#include \"app/" "nothing includes app/")
forbid(fuzz "${torch}" "fuzz/ targets are torch-free (they build without LibTorch)")
forbid(fuzz "#include \"(model|train|app)/" "fuzz/ reaches core/, loader/, config/ only")
forbid(jobs "#include \"app/" "nothing includes app/")

# model/spec.h is read by config/: it must stay free of torch.
file(STRINGS ${SOURCE_DIR}/model/spec.h hits REGEX "${torch}|#include \"model/")
if(hits)
  message(FATAL_ERROR "${SOURCE_DIR}/model/spec.h: must stay free of torch: ${hits}")
endif()
message(STATUS "layout: folder contract holds")
