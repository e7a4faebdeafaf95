#!/usr/bin/env bash
# Prints how many cores this process may use, for the -j of builds and ctest. GNU nproc honours
# OMP_NUM_THREADS and OMP_THREAD_LIMIT, which the job scripts set to 1 for the training processes'
# thread hygiene: a build or a ctest run started after that would otherwise run one at a time.
OMP_NUM_THREADS='' OMP_THREAD_LIMIT='' exec nproc
